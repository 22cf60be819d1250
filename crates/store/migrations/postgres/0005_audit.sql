-- The audit log, as SQLite migration 9: one row per change to a managed object, written in the
-- change's own transaction. Only adds a table: every existing row stays.

CREATE TABLE audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at BIGINT NOT NULL,
    principal TEXT NOT NULL,
    role TEXT NOT NULL,
    object_kind TEXT NOT NULL,
    object_id BIGINT NOT NULL,
    object_name TEXT NOT NULL,
    owner_id BIGINT NOT NULL,
    action TEXT NOT NULL,
    changes TEXT NOT NULL
);
CREATE INDEX audit_object ON audit (object_kind, object_id, id);
CREATE INDEX audit_owner ON audit (owner_id, id);
CREATE INDEX audit_principal ON audit (principal, id);
CREATE INDEX audit_at ON audit (at, id);
