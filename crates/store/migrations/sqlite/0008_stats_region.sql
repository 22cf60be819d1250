-- Reports by region: the minute, hour and day rows gain `region`, the visitor's ISO 3166-2
-- subdivision (`US-CA`; '' when unknown, as for every row stored before), as a key column.
-- SQLite cannot change a primary key in place, so each table is rebuilt: created anew with
-- `region` as its last column (PostgreSQL adds it at the end too, so both keep one column
-- order) and in the key, filled from the old table, which is then dropped; its indexes are
-- made again. `stats_hour_line_item` has no geography and is untouched.

CREATE TABLE stats_minute_new (
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
    invalid_impressions INTEGER NOT NULL DEFAULT 0,
    invalid_clicks INTEGER NOT NULL DEFAULT 0,
    invalid_conversions INTEGER NOT NULL DEFAULT 0,
    invalid_crawler INTEGER NOT NULL DEFAULT 0,
    invalid_prefetch INTEGER NOT NULL DEFAULT 0,
    invalid_datacenter INTEGER NOT NULL DEFAULT 0,
    invalid_rate INTEGER NOT NULL DEFAULT 0,
    invalid_click_without_impression INTEGER NOT NULL DEFAULT 0,
    invalid_too_fast INTEGER NOT NULL DEFAULT 0,
    invalid_untokened_disabled INTEGER NOT NULL DEFAULT 0,
    invalid_repeat_conversion INTEGER NOT NULL DEFAULT 0,
    invalid_no_cache_buster INTEGER NOT NULL DEFAULT 0,
    region TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (line_item, bucket_start, creative, placement, country, region, device)
) WITHOUT ROWID;
INSERT INTO stats_minute_new (line_item, bucket_start, creative, placement, country, device, decisions, bids, wins, billings, losses, no_bids, impressions, clicks, conversions, cpm_micros, cpc_micros, invalid_impressions, invalid_clicks, invalid_conversions, invalid_crawler, invalid_prefetch, invalid_datacenter, invalid_rate, invalid_click_without_impression, invalid_too_fast, invalid_untokened_disabled, invalid_repeat_conversion, invalid_no_cache_buster, region)
    SELECT line_item, bucket_start, creative, placement, country, device, decisions, bids, wins, billings, losses, no_bids, impressions, clicks, conversions, cpm_micros, cpc_micros, invalid_impressions, invalid_clicks, invalid_conversions, invalid_crawler, invalid_prefetch, invalid_datacenter, invalid_rate, invalid_click_without_impression, invalid_too_fast, invalid_untokened_disabled, invalid_repeat_conversion, invalid_no_cache_buster, '' FROM stats_minute;
DROP TABLE stats_minute;
ALTER TABLE stats_minute_new RENAME TO stats_minute;
CREATE INDEX stats_minute_bucket ON stats_minute (bucket_start);

CREATE TABLE stats_hour_new (
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
    invalid_impressions INTEGER NOT NULL DEFAULT 0,
    invalid_clicks INTEGER NOT NULL DEFAULT 0,
    invalid_conversions INTEGER NOT NULL DEFAULT 0,
    invalid_crawler INTEGER NOT NULL DEFAULT 0,
    invalid_prefetch INTEGER NOT NULL DEFAULT 0,
    invalid_datacenter INTEGER NOT NULL DEFAULT 0,
    invalid_rate INTEGER NOT NULL DEFAULT 0,
    invalid_click_without_impression INTEGER NOT NULL DEFAULT 0,
    invalid_too_fast INTEGER NOT NULL DEFAULT 0,
    invalid_untokened_disabled INTEGER NOT NULL DEFAULT 0,
    invalid_repeat_conversion INTEGER NOT NULL DEFAULT 0,
    invalid_no_cache_buster INTEGER NOT NULL DEFAULT 0,
    region TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (line_item, bucket_start, creative, placement, country, region, device)
) WITHOUT ROWID;
INSERT INTO stats_hour_new (line_item, bucket_start, creative, placement, country, device, decisions, bids, wins, billings, losses, no_bids, impressions, clicks, conversions, cpm_micros, cpc_micros, invalid_impressions, invalid_clicks, invalid_conversions, invalid_crawler, invalid_prefetch, invalid_datacenter, invalid_rate, invalid_click_without_impression, invalid_too_fast, invalid_untokened_disabled, invalid_repeat_conversion, invalid_no_cache_buster, region)
    SELECT line_item, bucket_start, creative, placement, country, device, decisions, bids, wins, billings, losses, no_bids, impressions, clicks, conversions, cpm_micros, cpc_micros, invalid_impressions, invalid_clicks, invalid_conversions, invalid_crawler, invalid_prefetch, invalid_datacenter, invalid_rate, invalid_click_without_impression, invalid_too_fast, invalid_untokened_disabled, invalid_repeat_conversion, invalid_no_cache_buster, '' FROM stats_hour;
DROP TABLE stats_hour;
ALTER TABLE stats_hour_new RENAME TO stats_hour;
CREATE INDEX stats_hour_placement ON stats_hour (placement, bucket_start);
CREATE INDEX stats_hour_bucket ON stats_hour (bucket_start);

CREATE TABLE stats_day_new (
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
    invalid_impressions INTEGER NOT NULL DEFAULT 0,
    invalid_clicks INTEGER NOT NULL DEFAULT 0,
    invalid_conversions INTEGER NOT NULL DEFAULT 0,
    invalid_crawler INTEGER NOT NULL DEFAULT 0,
    invalid_prefetch INTEGER NOT NULL DEFAULT 0,
    invalid_datacenter INTEGER NOT NULL DEFAULT 0,
    invalid_rate INTEGER NOT NULL DEFAULT 0,
    invalid_click_without_impression INTEGER NOT NULL DEFAULT 0,
    invalid_too_fast INTEGER NOT NULL DEFAULT 0,
    invalid_untokened_disabled INTEGER NOT NULL DEFAULT 0,
    invalid_repeat_conversion INTEGER NOT NULL DEFAULT 0,
    invalid_no_cache_buster INTEGER NOT NULL DEFAULT 0,
    region TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (line_item, bucket_start, creative, placement, country, region, device)
) WITHOUT ROWID;
INSERT INTO stats_day_new (line_item, bucket_start, creative, placement, country, device, decisions, bids, wins, billings, losses, no_bids, impressions, clicks, conversions, cpm_micros, cpc_micros, invalid_impressions, invalid_clicks, invalid_conversions, invalid_crawler, invalid_prefetch, invalid_datacenter, invalid_rate, invalid_click_without_impression, invalid_too_fast, invalid_untokened_disabled, invalid_repeat_conversion, invalid_no_cache_buster, region)
    SELECT line_item, bucket_start, creative, placement, country, device, decisions, bids, wins, billings, losses, no_bids, impressions, clicks, conversions, cpm_micros, cpc_micros, invalid_impressions, invalid_clicks, invalid_conversions, invalid_crawler, invalid_prefetch, invalid_datacenter, invalid_rate, invalid_click_without_impression, invalid_too_fast, invalid_untokened_disabled, invalid_repeat_conversion, invalid_no_cache_buster, '' FROM stats_day;
DROP TABLE stats_day;
ALTER TABLE stats_day_new RENAME TO stats_day;
CREATE INDEX stats_day_placement ON stats_day (placement, bucket_start);
CREATE INDEX stats_day_bucket ON stats_day (bucket_start);
