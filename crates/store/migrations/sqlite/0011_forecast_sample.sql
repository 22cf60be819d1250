-- The forecast's sample: the ad requests edges kept, as the forecast encodes them
-- (`SampleRecord`, records back to back), one row per aggregation run and UTC day (`day`: days
-- since 1970-01-01), written in the run's transaction with its checkpoints, so each record is
-- stored once. Days past the history are deleted by the runs. Only adds a table.

CREATE TABLE forecast_sample (
    day INTEGER NOT NULL,
    records BLOB NOT NULL
);
CREATE INDEX forecast_sample_day ON forecast_sample (day);
