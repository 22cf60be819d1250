-- Invalid traffic by kind and by reason, as SQLite migration 7: every stats table gains the
-- columns, 0 for rows already stored. Columns are added at the end of each table, in the
-- order SQLite adds them, so the two schemas keep one column order.

ALTER TABLE stats_minute
    ADD COLUMN invalid_impressions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_clicks BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_conversions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_crawler BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_prefetch BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_datacenter BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_rate BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_click_without_impression BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_too_fast BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_untokened_disabled BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_repeat_conversion BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_no_cache_buster BIGINT NOT NULL DEFAULT 0;

ALTER TABLE stats_hour
    ADD COLUMN invalid_impressions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_clicks BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_conversions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_crawler BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_prefetch BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_datacenter BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_rate BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_click_without_impression BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_too_fast BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_untokened_disabled BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_repeat_conversion BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_no_cache_buster BIGINT NOT NULL DEFAULT 0;

ALTER TABLE stats_day
    ADD COLUMN invalid_impressions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_clicks BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_conversions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_crawler BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_prefetch BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_datacenter BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_rate BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_click_without_impression BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_too_fast BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_untokened_disabled BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_repeat_conversion BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_no_cache_buster BIGINT NOT NULL DEFAULT 0;

ALTER TABLE stats_hour_line_item
    ADD COLUMN invalid_impressions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_clicks BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_conversions BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_crawler BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_prefetch BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_datacenter BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_rate BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_click_without_impression BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_too_fast BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_untokened_disabled BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_repeat_conversion BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN invalid_no_cache_buster BIGINT NOT NULL DEFAULT 0;
