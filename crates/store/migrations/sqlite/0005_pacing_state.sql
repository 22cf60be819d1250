-- The manager's pacing state (lease book, controller states, control version) as one JSON
-- document per name: written whole after every round and every sync that changed it.
CREATE TABLE pacing_state (
    name TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
