-- The PostgreSQL schema, equal in meaning to SQLite migrations 1 to 5 (see
-- migrations/sqlite/): one table per object kind with the same columns, links, API tokens, the
-- change counter, the aggregates, the collection checkpoints and dedupe entries, and the
-- pacing state. Timestamps are unix microseconds (BIGINT), as in SQLite, so that both stores
-- keep exactly the microseconds the clock gave. Object ids come from identity columns: unique
-- and increasing, not gapless (a rolled-back insert consumes its id).

CREATE TABLE advertisers (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent_id BIGINT CHECK (parent_id IS NULL),
    owner_id BIGINT NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX advertisers_owner ON advertisers (owner_id, id);
CREATE INDEX advertisers_status ON advertisers (status);

CREATE TABLE campaigns (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent_id BIGINT NOT NULL REFERENCES advertisers (id),
    owner_id BIGINT NOT NULL REFERENCES advertisers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX campaigns_owner ON campaigns (owner_id, id);
CREATE INDEX campaigns_parent ON campaigns (parent_id, id);
CREATE INDEX campaigns_status ON campaigns (status);

CREATE TABLE line_items (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent_id BIGINT NOT NULL REFERENCES campaigns (id),
    owner_id BIGINT NOT NULL REFERENCES advertisers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX line_items_owner ON line_items (owner_id, id);
CREATE INDEX line_items_parent ON line_items (parent_id, id);
CREATE INDEX line_items_status ON line_items (status);

CREATE TABLE creatives (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent_id BIGINT NOT NULL REFERENCES line_items (id),
    owner_id BIGINT NOT NULL REFERENCES advertisers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX creatives_owner ON creatives (owner_id, id);
CREATE INDEX creatives_parent ON creatives (parent_id, id);
CREATE INDEX creatives_status ON creatives (status);

CREATE TABLE publishers (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent_id BIGINT CHECK (parent_id IS NULL),
    owner_id BIGINT NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX publishers_owner ON publishers (owner_id, id);
CREATE INDEX publishers_status ON publishers (status);

CREATE TABLE sites (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent_id BIGINT NOT NULL REFERENCES publishers (id),
    owner_id BIGINT NOT NULL REFERENCES publishers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX sites_owner ON sites (owner_id, id);
CREATE INDEX sites_parent ON sites (parent_id, id);
CREATE INDEX sites_status ON sites (status);

CREATE TABLE placements (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent_id BIGINT NOT NULL REFERENCES sites (id),
    owner_id BIGINT NOT NULL REFERENCES publishers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX placements_owner ON placements (owner_id, id);
CREATE INDEX placements_parent ON placements (parent_id, id);
CREATE INDEX placements_status ON placements (status);

CREATE TABLE line_item_placements (
    line_item_id BIGINT NOT NULL REFERENCES line_items (id),
    placement_id BIGINT NOT NULL REFERENCES placements (id),
    created_at BIGINT NOT NULL,
    PRIMARY KEY (line_item_id, placement_id)
);
CREATE INDEX line_item_placements_placement ON line_item_placements (placement_id);

-- Only the SHA-256 of a token is stored. A tenant role is bound to its owner; an admin to none.
CREATE TABLE api_tokens (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash BYTEA NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    role TEXT NOT NULL CHECK (role IN ('admin', 'advertiser', 'publisher')),
    owner_id BIGINT,
    label TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    CHECK ((role = 'admin') = (owner_id IS NULL))
);

-- Bumped by every change to objects or links in the same transaction; snapshots are tagged
-- with it. Every write transaction of objects, links, tokens and users locks this row first,
-- which orders those writes as SQLite's single writer does.
CREATE TABLE change_counter (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    value BIGINT NOT NULL
);
INSERT INTO change_counter (id, value) VALUES (1, 0);

-- Aggregated delivery statistics: the same counters at three bucket widths, all in UTC
-- (`bucket_start` in seconds since the epoch), and hourly totals per line item. Ids are not
-- foreign keys (a row outlives archiving; no-bid rows have line item 0). `country` is two
-- capitals or '' (unknown); `device` the edge's device code (0 unknown).
CREATE TABLE stats_minute (
    line_item BIGINT NOT NULL,
    bucket_start BIGINT NOT NULL,
    creative BIGINT NOT NULL,
    placement BIGINT NOT NULL,
    country TEXT NOT NULL,
    device SMALLINT NOT NULL,
    decisions BIGINT NOT NULL,
    bids BIGINT NOT NULL,
    wins BIGINT NOT NULL,
    billings BIGINT NOT NULL,
    losses BIGINT NOT NULL,
    no_bids BIGINT NOT NULL,
    impressions BIGINT NOT NULL,
    clicks BIGINT NOT NULL,
    conversions BIGINT NOT NULL,
    cpm_micros BIGINT NOT NULL,
    cpc_micros BIGINT NOT NULL,
    PRIMARY KEY (line_item, bucket_start, creative, placement, country, device)
);
-- Minute rows are written most and read least: no placement index (see SQLite migration 3).
CREATE INDEX stats_minute_bucket ON stats_minute (bucket_start);

CREATE TABLE stats_hour (LIKE stats_minute INCLUDING ALL);
CREATE INDEX stats_hour_placement ON stats_hour (placement, bucket_start);

CREATE TABLE stats_day (LIKE stats_minute INCLUDING ALL);
CREATE INDEX stats_day_placement ON stats_day (placement, bucket_start);

CREATE TABLE stats_hour_line_item (
    line_item BIGINT NOT NULL,
    bucket_start BIGINT NOT NULL,
    decisions BIGINT NOT NULL,
    bids BIGINT NOT NULL,
    wins BIGINT NOT NULL,
    billings BIGINT NOT NULL,
    losses BIGINT NOT NULL,
    no_bids BIGINT NOT NULL,
    impressions BIGINT NOT NULL,
    clicks BIGINT NOT NULL,
    conversions BIGINT NOT NULL,
    cpm_micros BIGINT NOT NULL,
    cpc_micros BIGINT NOT NULL,
    PRIMARY KEY (line_item, bucket_start)
);
CREATE INDEX stats_hour_line_item_bucket ON stats_hour_line_item (bucket_start);

-- Unique users: a HyperLogLog sketch per line item and local day (yyyymmdd).
CREATE TABLE stats_users (
    line_item BIGINT NOT NULL,
    day INTEGER NOT NULL,
    sketch BYTEA NOT NULL,
    PRIMARY KEY (line_item, day)
);

-- How far the manager has read each edge's log: the next (segment, byte_offset) of each
-- shard and the latest event time read there (µs), moved in the transaction of the
-- aggregates read from those bytes.
CREATE TABLE stats_checkpoints (
    source TEXT NOT NULL,
    shard BIGINT NOT NULL,
    segment BIGINT NOT NULL,
    byte_offset BIGINT NOT NULL,
    max_event_time BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (source, shard)
);

-- Event ids already counted, one row per aggregation run (26 bytes per id, see SQLite
-- migration 2); deleted once every id in a row is past the dedupe window.
CREATE TABLE stats_seen (
    run BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    max_time BIGINT NOT NULL,
    entries BYTEA NOT NULL
);
CREATE INDEX stats_seen_max_time ON stats_seen (max_time);

-- The manager's pacing state as one JSON document per name.
CREATE TABLE pacing_state (
    name TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
