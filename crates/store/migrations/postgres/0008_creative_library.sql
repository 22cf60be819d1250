-- The creative library: creatives used by line items besides the one each was uploaded under
-- (`creatives.parent_id`, which keeps using it as before, with the creative's own weight). A
-- use has its own weight and an optional flight (unix microseconds, end exclusive). Only adds
-- a table: every existing creative keeps serving under its line item.

CREATE TABLE line_item_creatives (
    line_item_id BIGINT NOT NULL REFERENCES line_items (id),
    creative_id BIGINT NOT NULL REFERENCES creatives (id),
    weight BIGINT NOT NULL CHECK (weight BETWEEN 1 AND 1000),
    start_at BIGINT,
    end_at BIGINT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (line_item_id, creative_id)
);
CREATE INDEX line_item_creatives_creative ON line_item_creatives (creative_id);
