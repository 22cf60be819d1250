-- The creative library: creatives used by line items besides the one each was uploaded under
-- (`creatives.parent_id`, which keeps using it as before, with the creative's own weight). A
-- use has its own weight and an optional flight (unix microseconds, end exclusive). Only adds
-- a table: every existing creative keeps serving under its line item.

CREATE TABLE line_item_creatives (
    line_item_id INTEGER NOT NULL REFERENCES line_items (id),
    creative_id INTEGER NOT NULL REFERENCES creatives (id),
    weight INTEGER NOT NULL CHECK (weight BETWEEN 1 AND 1000),
    start_at INTEGER,
    end_at INTEGER,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (line_item_id, creative_id)
) WITHOUT ROWID;
CREATE INDEX line_item_creatives_creative ON line_item_creatives (creative_id);
