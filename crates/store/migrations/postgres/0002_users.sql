-- Dashboard users and their sign-in sessions, as SQLite migration 6: a user has the roles of an
-- API token and an argon2 password hash in PHC string form; only the SHA-256 of a session id
-- is stored, with the CSRF token bound to the session.
CREATE TABLE users (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL CHECK (role IN ('admin', 'advertiser', 'publisher')),
    owner_id BIGINT,
    password_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    CHECK ((role = 'admin') = (owner_id IS NULL))
);

CREATE TABLE user_sessions (
    session_hash BYTEA PRIMARY KEY CHECK (length(session_hash) = 32),
    user_id BIGINT NOT NULL REFERENCES users (id),
    csrf_token TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX user_sessions_expiry ON user_sessions (expires_at);
