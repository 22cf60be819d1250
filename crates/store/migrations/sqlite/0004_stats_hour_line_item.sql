-- Hourly totals per line item: what most reports read (by time, line item, campaign or
-- advertiser, without supply, country or device detail). A 30-day hourly report for an
-- advertiser then reads 720 rows per line item instead of every (creative, placement,
-- country, device) combination: the demo-size bench went from about 230 ms to a few. Every
-- run adds to it in the same transaction as `stats_hour`, one statement more.

CREATE TABLE stats_hour_line_item (
    line_item INTEGER NOT NULL,
    bucket_start INTEGER NOT NULL,
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
    PRIMARY KEY (line_item, bucket_start)
) WITHOUT ROWID;
CREATE INDEX stats_hour_line_item_bucket ON stats_hour_line_item (bucket_start);

INSERT INTO stats_hour_line_item
SELECT line_item, bucket_start, SUM(decisions), SUM(bids), SUM(wins), SUM(billings),
    SUM(losses), SUM(no_bids), SUM(impressions), SUM(clicks), SUM(conversions),
    SUM(cpm_micros), SUM(cpc_micros)
FROM stats_hour GROUP BY line_item, bucket_start;
