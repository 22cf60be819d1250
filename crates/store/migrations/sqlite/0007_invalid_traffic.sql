-- Invalid traffic: the impressions, clicks and conversions the edge judged invalid (log kinds
-- 10-12), counted by kind and, the same events again, by reason (one column per reason code of
-- the log; an event whose reason a build does not know counts by kind only). They are never
-- impressions, clicks, conversions or spend, so pacing and billing, which read those columns,
-- never see them. Every table that holds the counters gains the columns; rows already stored
-- had no invalid traffic counted, 0. Invalid events refused before an ad was decided have line
-- item 0, as no-bids do.

ALTER TABLE stats_minute ADD COLUMN invalid_impressions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_clicks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_conversions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_crawler INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_prefetch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_datacenter INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_rate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_click_without_impression INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_too_fast INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_untokened_disabled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_repeat_conversion INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN invalid_no_cache_buster INTEGER NOT NULL DEFAULT 0;

ALTER TABLE stats_hour ADD COLUMN invalid_impressions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_clicks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_conversions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_crawler INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_prefetch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_datacenter INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_rate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_click_without_impression INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_too_fast INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_untokened_disabled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_repeat_conversion INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN invalid_no_cache_buster INTEGER NOT NULL DEFAULT 0;

ALTER TABLE stats_day ADD COLUMN invalid_impressions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_clicks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_conversions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_crawler INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_prefetch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_datacenter INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_rate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_click_without_impression INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_too_fast INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_untokened_disabled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_repeat_conversion INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN invalid_no_cache_buster INTEGER NOT NULL DEFAULT 0;

ALTER TABLE stats_hour_line_item ADD COLUMN invalid_impressions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_clicks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_conversions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_crawler INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_prefetch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_datacenter INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_rate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_click_without_impression INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_too_fast INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_untokened_disabled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_repeat_conversion INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN invalid_no_cache_buster INTEGER NOT NULL DEFAULT 0;
