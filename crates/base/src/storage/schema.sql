-- lore's storage schema, shared by native SQLite, Cloudflare D1 and Spin SQLite.
-- One ordered key-value table: keys are printable ASCII and sort bytewise (BINARY collation),
-- values are JSON bytes. Org scoping lives in the key layout (see src/keys.rs).
CREATE TABLE IF NOT EXISTS lore_kv (
    k TEXT PRIMARY KEY NOT NULL,
    v BLOB NOT NULL
) WITHOUT ROWID;

-- Schema version, so later releases can migrate.
CREATE TABLE IF NOT EXISTS lore_meta (
    name TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
INSERT OR IGNORE INTO lore_meta (name, value) VALUES ('schema_version', '1');

-- Batch preconditions on hosts without interactive transactions (D1 batches): a statement that
-- inserts 0 here fails the CHECK and rolls the whole batch back.
CREATE TABLE IF NOT EXISTS lore_guard (
    ok INTEGER NOT NULL CHECK (ok = 1)
);
