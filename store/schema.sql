-- cachegate's SQLite schema, as forward migrations. The store applies, in one
-- transaction each, every migration whose number is above the highest version
-- recorded in schema_version. Never edit a migration that has shipped: add one.
-- Times are Unix milliseconds.

-- migration: 1
CREATE TABLE schema_version (
    version    INTEGER PRIMARY KEY,
    applied_ms INTEGER NOT NULL
);

-- A tenant's id is its namespace in every cache. Tenant 1 ("default") answers
-- requests when authentication is off. policy: JSON of per-tenant overrides.
CREATE TABLE tenants (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL UNIQUE,
    created_ms INTEGER NOT NULL,
    policy     TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO tenants (id, name, created_ms) VALUES (1, 'default', CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));

-- An API key is stored only as its SHA-256; prefix: its first characters, shown in lists.
CREATE TABLE api_keys (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant     INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    prefix     TEXT NOT NULL UNIQUE,
    sha256     BLOB NOT NULL UNIQUE,
    created_ms INTEGER NOT NULL,
    revoked_ms INTEGER
);

-- Usage per tenant per UTC day ("YYYY-MM-DD").
CREATE TABLE usage_daily (
    tenant            INTEGER NOT NULL,
    day               TEXT NOT NULL,
    requests          INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens     INTEGER NOT NULL DEFAULT 0,
    exact_hits        INTEGER NOT NULL DEFAULT 0,
    semantic_hits     INTEGER NOT NULL DEFAULT 0,
    tokens_saved      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, day)
);

-- Cached answers. partition and exact: 64-bit hashes of the canonical request (see the
-- gateway's cache key); embedding: float32[dim] of the final user message, L2-normalized,
-- or empty for an entry found by its exact key only (a completion's prompt);
-- bytes: what the entry counts against its tenant's capacity. AUTOINCREMENT: an id is
-- never reused, so an index snapshot can tell new rows from old ones.
CREATE TABLE entries (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant            INTEGER NOT NULL,
    partition         INTEGER NOT NULL,
    exact             INTEGER NOT NULL,
    model             TEXT NOT NULL,
    query             TEXT NOT NULL,
    embedding         BLOB NOT NULL,
    answer            TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    finish_reason     TEXT NOT NULL,
    created_ms        INTEGER NOT NULL,
    last_hit_ms       INTEGER NOT NULL,
    hit_count         INTEGER NOT NULL DEFAULT 0,
    expires_ms        INTEGER NOT NULL,
    bytes             INTEGER NOT NULL
);
CREATE UNIQUE INDEX entries_exact ON entries (tenant, exact);
CREATE INDEX entries_lru ON entries (tenant, last_hit_ms);
CREATE INDEX entries_expiry ON entries (expires_ms);

-- migration: 2
-- Responses of the Responses API, kept so that a request can continue one
-- (previous_response_id) and a client can read one back. body: the response object (JSON);
-- messages: the conversation through its answer as chat messages (JSON), without its
-- instructions, which a continuation does not inherit. expires_ms: 0 never.
CREATE TABLE responses (
    id         TEXT PRIMARY KEY,
    tenant     INTEGER NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    body       TEXT NOT NULL,
    messages   TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX responses_expiry ON responses (expires_ms) WHERE expires_ms > 0;

-- migration: 3
-- A response's size (its body and messages, in bytes): a tenant's stored responses are kept
-- within server.responses_max_bytes, the oldest going first. Those stored before count as 0
-- (sizing them would rewrite the whole table at start-up); they are the oldest, the first
-- to go past the budget, and expire within the TTL.
ALTER TABLE responses ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
CREATE INDEX responses_age ON responses (tenant, created_ms, bytes);

-- migration: 4
-- A tenant's entries by id: `GET /admin/cache` and `cachegate cache list` page through them
-- newest first without reading and sorting all of them.
CREATE INDEX entries_tenant_id ON entries (tenant, id);

-- migration: 5
-- The store's own settings. entry_id_key: the secret that turns an entry's row id into the
-- id the API shows (X-Cache-Entry, GET /admin/cache), so that the ids one tenant sees say
-- nothing of how many entries the others stored between its own; made once, at random.
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
) WITHOUT ROWID;
INSERT INTO settings VALUES ('entry_id_key', randomblob(32));
