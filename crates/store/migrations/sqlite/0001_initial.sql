-- Initial schema. One table per object kind, all with the same columns so that one code path
-- serves every kind. Timestamps are unix microseconds. `body` is the JSON of the model object;
-- the other columns are what the store filters, scopes and checks on.
--
-- Roots (advertisers, publishers) keep a `parent_id` column that is always NULL, and own
-- themselves: `owner_id` is set to the row's own id in the transaction that inserts it.
-- Children reference their parent and their owner (the root of their side).

CREATE TABLE advertisers (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER CHECK (parent_id IS NULL),
    owner_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX advertisers_owner ON advertisers (owner_id, id);
CREATE INDEX advertisers_status ON advertisers (status);

CREATE TABLE campaigns (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER NOT NULL REFERENCES advertisers (id),
    owner_id INTEGER NOT NULL REFERENCES advertisers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX campaigns_owner ON campaigns (owner_id, id);
CREATE INDEX campaigns_parent ON campaigns (parent_id, id);
CREATE INDEX campaigns_status ON campaigns (status);

CREATE TABLE line_items (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER NOT NULL REFERENCES campaigns (id),
    owner_id INTEGER NOT NULL REFERENCES advertisers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX line_items_owner ON line_items (owner_id, id);
CREATE INDEX line_items_parent ON line_items (parent_id, id);
CREATE INDEX line_items_status ON line_items (status);

CREATE TABLE creatives (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER NOT NULL REFERENCES line_items (id),
    owner_id INTEGER NOT NULL REFERENCES advertisers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX creatives_owner ON creatives (owner_id, id);
CREATE INDEX creatives_parent ON creatives (parent_id, id);
CREATE INDEX creatives_status ON creatives (status);

CREATE TABLE publishers (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER CHECK (parent_id IS NULL),
    owner_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX publishers_owner ON publishers (owner_id, id);
CREATE INDEX publishers_status ON publishers (status);

CREATE TABLE sites (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER NOT NULL REFERENCES publishers (id),
    owner_id INTEGER NOT NULL REFERENCES publishers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX sites_owner ON sites (owner_id, id);
CREATE INDEX sites_parent ON sites (parent_id, id);
CREATE INDEX sites_status ON sites (status);

CREATE TABLE placements (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER NOT NULL REFERENCES sites (id),
    owner_id INTEGER NOT NULL REFERENCES publishers (id),
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX placements_owner ON placements (owner_id, id);
CREATE INDEX placements_parent ON placements (parent_id, id);
CREATE INDEX placements_status ON placements (status);

CREATE TABLE line_item_placements (
    line_item_id INTEGER NOT NULL REFERENCES line_items (id),
    placement_id INTEGER NOT NULL REFERENCES placements (id),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (line_item_id, placement_id)
) WITHOUT ROWID;
CREATE INDEX line_item_placements_placement ON line_item_placements (placement_id);

-- Only the SHA-256 of a token is stored. A tenant role is bound to its owner; an admin to none.
CREATE TABLE api_tokens (
    id INTEGER PRIMARY KEY,
    token_hash BLOB NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    role TEXT NOT NULL CHECK (role IN ('admin', 'advertiser', 'publisher')),
    owner_id INTEGER,
    label TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    CHECK ((role = 'admin') = (owner_id IS NULL))
);

-- Bumped by every change to objects or links in the same transaction; snapshots are tagged
-- with it.
CREATE TABLE change_counter (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
);
INSERT INTO change_counter (id, value) VALUES (1, 0);
