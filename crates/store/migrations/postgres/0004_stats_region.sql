-- Reports by region, as SQLite migration 8: the minute, hour and day rows gain `region` (ISO
-- 3166-2 such as `US-CA`; '' when unknown, as for every row stored before) at the end of each
-- table, and in its primary key.

ALTER TABLE stats_minute ADD COLUMN region TEXT NOT NULL DEFAULT '';
ALTER TABLE stats_minute DROP CONSTRAINT stats_minute_pkey;
ALTER TABLE stats_minute ADD PRIMARY KEY (line_item, bucket_start, creative, placement, country, region, device);

ALTER TABLE stats_hour ADD COLUMN region TEXT NOT NULL DEFAULT '';
ALTER TABLE stats_hour DROP CONSTRAINT stats_hour_pkey;
ALTER TABLE stats_hour ADD PRIMARY KEY (line_item, bucket_start, creative, placement, country, region, device);

ALTER TABLE stats_day ADD COLUMN region TEXT NOT NULL DEFAULT '';
ALTER TABLE stats_day DROP CONSTRAINT stats_day_pkey;
ALTER TABLE stats_day ADD PRIMARY KEY (line_item, bucket_start, creative, placement, country, region, device);
