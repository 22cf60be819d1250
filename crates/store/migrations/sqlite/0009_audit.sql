-- The audit log: one row per change to a managed object, written in the change's own
-- transaction. `principal` is `token:<id>`, `user:<name>` or `cli`; `owner_id` is the object's
-- advertiser or publisher, so a tenant reads only its own objects' history; `changes` is the
-- JSON of the changed fields, before and after. Only adds a table: every existing row stays.

CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    principal TEXT NOT NULL,
    role TEXT NOT NULL,
    object_kind TEXT NOT NULL,
    object_id INTEGER NOT NULL,
    object_name TEXT NOT NULL,
    owner_id INTEGER NOT NULL,
    action TEXT NOT NULL,
    changes TEXT NOT NULL
);
CREATE INDEX audit_object ON audit (object_kind, object_id, id);
CREATE INDEX audit_owner ON audit (owner_id, id);
CREATE INDEX audit_principal ON audit (principal, id);
CREATE INDEX audit_at ON audit (at, id);
