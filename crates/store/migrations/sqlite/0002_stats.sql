-- Aggregated delivery statistics (issue 6). Written by the manager's aggregation runs, each
-- in one transaction with a constant number of statements; read by reports and pacing.
--
-- The three stats tables hold the same counters at three bucket widths, all in UTC:
-- `bucket_start` is the bucket's first second since the epoch. Ids are not foreign keys: a
-- row outlives archiving, and no-bid rows have line item 0. `country` is two capitals or ''
-- (unknown); `device` is the edge's device code (0 unknown). Spend is kept as two exact sums:
-- `cpm_micros` (per-mille amounts) and `cpc_micros` (per-click amounts).
--
-- The primary key leads with the line item, so one advertiser's report reads a range of each
-- of its line items; the placement index serves publishers' reports, the bucket index reports
-- over everything (admins) and the minute retention.

CREATE TABLE stats_minute (
    line_item INTEGER NOT NULL,
    bucket_start INTEGER NOT NULL,
    creative INTEGER NOT NULL,
    placement INTEGER NOT NULL,
    country TEXT NOT NULL,
    device INTEGER NOT NULL,
    decisions INTEGER NOT NULL,
    bids INTEGER NOT NULL,
    wins INTEGER NOT NULL,
    billings INTEGER NOT NULL,
    losses INTEGER NOT NULL,
    no_bids INTEGER NOT NULL,
    impressions INTEGER NOT NULL,
    clicks INTEGER NOT NULL,
    conversions INTEGER NOT NULL,
    cpm_micros INTEGER NOT NULL,
    cpc_micros INTEGER NOT NULL,
    PRIMARY KEY (line_item, bucket_start, creative, placement, country, device)
) WITHOUT ROWID;
CREATE INDEX stats_minute_placement ON stats_minute (placement, bucket_start);
CREATE INDEX stats_minute_bucket ON stats_minute (bucket_start);

CREATE TABLE stats_hour (
    line_item INTEGER NOT NULL,
    bucket_start INTEGER NOT NULL,
    creative INTEGER NOT NULL,
    placement INTEGER NOT NULL,
    country TEXT NOT NULL,
    device INTEGER NOT NULL,
    decisions INTEGER NOT NULL,
    bids INTEGER NOT NULL,
    wins INTEGER NOT NULL,
    billings INTEGER NOT NULL,
    losses INTEGER NOT NULL,
    no_bids INTEGER NOT NULL,
    impressions INTEGER NOT NULL,
    clicks INTEGER NOT NULL,
    conversions INTEGER NOT NULL,
    cpm_micros INTEGER NOT NULL,
    cpc_micros INTEGER NOT NULL,
    PRIMARY KEY (line_item, bucket_start, creative, placement, country, device)
) WITHOUT ROWID;
CREATE INDEX stats_hour_placement ON stats_hour (placement, bucket_start);
CREATE INDEX stats_hour_bucket ON stats_hour (bucket_start);

CREATE TABLE stats_day (
    line_item INTEGER NOT NULL,
    bucket_start INTEGER NOT NULL,
    creative INTEGER NOT NULL,
    placement INTEGER NOT NULL,
    country TEXT NOT NULL,
    device INTEGER NOT NULL,
    decisions INTEGER NOT NULL,
    bids INTEGER NOT NULL,
    wins INTEGER NOT NULL,
    billings INTEGER NOT NULL,
    losses INTEGER NOT NULL,
    no_bids INTEGER NOT NULL,
    impressions INTEGER NOT NULL,
    clicks INTEGER NOT NULL,
    conversions INTEGER NOT NULL,
    cpm_micros INTEGER NOT NULL,
    cpc_micros INTEGER NOT NULL,
    PRIMARY KEY (line_item, bucket_start, creative, placement, country, device)
) WITHOUT ROWID;
CREATE INDEX stats_day_placement ON stats_day (placement, bucket_start);
CREATE INDEX stats_day_bucket ON stats_day (bucket_start);

-- Unique users: a HyperLogLog sketch per line item and local day (yyyymmdd, in the time zone
-- of the line item's advertiser), merged into on every run that saw its users.
CREATE TABLE stats_users (
    line_item INTEGER NOT NULL,
    day INTEGER NOT NULL,
    sketch BLOB NOT NULL,
    PRIMARY KEY (line_item, day)
) WITHOUT ROWID;

-- How far the manager has read each edge's log: the next (segment, offset) of each shard,
-- and the latest event time read there (µs; for the dedupe watermark). Updated in the same
-- transaction as the aggregates read from those bytes.
CREATE TABLE stats_checkpoints (
    source TEXT NOT NULL,
    shard INTEGER NOT NULL,
    segment INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    max_event_time INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (source, shard)
) WITHOUT ROWID;

-- Event ids already counted, one row per aggregation run: `entries` is the run's new or
-- changed ids (26 bytes each: id u128, kinds u16, latest event second i64, little-endian);
-- `max_time` the latest event second among them. Rows are deleted once every id in them is
-- past the dedupe window.
CREATE TABLE stats_seen (
    run INTEGER PRIMARY KEY,
    max_time INTEGER NOT NULL,
    entries BLOB NOT NULL
);
CREATE INDEX stats_seen_max_time ON stats_seen (max_time);
