-- The forecast's sample, as SQLite migration 11: the ad requests edges kept (`SampleRecord`s
-- back to back), one row per aggregation run and UTC day (days since 1970-01-01), written in
-- the run's transaction with its checkpoints. Only adds a table.

CREATE TABLE forecast_sample (
    day INTEGER NOT NULL,
    records BYTEA NOT NULL
);
CREATE INDEX forecast_sample_day ON forecast_sample (day);
