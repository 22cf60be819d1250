-- Dashboard users and their sign-in sessions. A user has the roles of an API token (a tenant
-- role bound to its owner, an admin to none) and an argon2 password hash in PHC string form.
-- Only the SHA-256 of a session id is stored, as for API tokens; the CSRF token is bound to the
-- session it was issued with.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL CHECK (role IN ('admin', 'advertiser', 'publisher')),
    owner_id INTEGER,
    password_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    CHECK ((role = 'admin') = (owner_id IS NULL))
);

CREATE TABLE user_sessions (
    session_hash BLOB PRIMARY KEY CHECK (length(session_hash) = 32),
    user_id INTEGER NOT NULL REFERENCES users (id),
    csrf_token TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX user_sessions_expiry ON user_sessions (expires_at);
