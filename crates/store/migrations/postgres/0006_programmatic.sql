-- Programmatic demand, as SQLite migration 10: every stats table gains the columns, 0 for rows
-- already stored. Columns are added at the end of each table, in the order SQLite adds them,
-- so the two schemas keep one column order.

ALTER TABLE stats_minute
    ADD COLUMN programmatic_auctions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_requests BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_bids BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_timeouts BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_wins BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_direct_wins BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_impressions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_cpm_micros BIGINT NOT NULL DEFAULT 0;

ALTER TABLE stats_hour
    ADD COLUMN programmatic_auctions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_requests BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_bids BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_timeouts BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_wins BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_direct_wins BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_impressions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_cpm_micros BIGINT NOT NULL DEFAULT 0;

ALTER TABLE stats_day
    ADD COLUMN programmatic_auctions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_requests BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_bids BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_timeouts BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_wins BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_direct_wins BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_impressions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_cpm_micros BIGINT NOT NULL DEFAULT 0;

ALTER TABLE stats_hour_line_item
    ADD COLUMN programmatic_auctions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_requests BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_bids BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_timeouts BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_wins BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_direct_wins BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_impressions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN programmatic_cpm_micros BIGINT NOT NULL DEFAULT 0;
