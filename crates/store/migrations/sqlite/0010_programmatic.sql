-- Programmatic demand: the unified auction of a placement's ad request among the gateway's
-- bidders (log kinds 13 and 14), counted on rows of line item 0 whose creative column holds the
-- bidder's id: auctions, bid requests, bids, timeouts, wins, auctions the direct line item won,
-- impressions, and the impressions' net CPMs summed (micros of the gateway's currency; revenue
-- is that sum / 1,000). Every table that holds the counters gains the columns; rows already
-- stored had none counted, 0.

ALTER TABLE stats_minute ADD COLUMN programmatic_auctions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN programmatic_requests INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN programmatic_bids INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN programmatic_timeouts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN programmatic_wins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN programmatic_direct_wins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN programmatic_impressions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN programmatic_cpm_micros INTEGER NOT NULL DEFAULT 0;

ALTER TABLE stats_hour ADD COLUMN programmatic_auctions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN programmatic_requests INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN programmatic_bids INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN programmatic_timeouts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN programmatic_wins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN programmatic_direct_wins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN programmatic_impressions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN programmatic_cpm_micros INTEGER NOT NULL DEFAULT 0;

ALTER TABLE stats_day ADD COLUMN programmatic_auctions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN programmatic_requests INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN programmatic_bids INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN programmatic_timeouts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN programmatic_wins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN programmatic_direct_wins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN programmatic_impressions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_day ADD COLUMN programmatic_cpm_micros INTEGER NOT NULL DEFAULT 0;

ALTER TABLE stats_hour_line_item ADD COLUMN programmatic_auctions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN programmatic_requests INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN programmatic_bids INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN programmatic_timeouts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN programmatic_wins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN programmatic_direct_wins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN programmatic_impressions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour_line_item ADD COLUMN programmatic_cpm_micros INTEGER NOT NULL DEFAULT 0;
