-- 0007: the operator's pool of Anthropic credentials, its named entries.
-- The shared credential "anthropic" stays in credentials, where it is the
-- pool's entry "default".

CREATE TABLE pool_entries (
	name       TEXT    NOT NULL PRIMARY KEY,
	weight     INTEGER NOT NULL CHECK (weight >= 1),
	url        TEXT    NOT NULL,
	sealed     BLOB    NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

-- The audit log names the pool entry that paid for a call.
ALTER TABLE audit ADD COLUMN paid_by TEXT NOT NULL DEFAULT '';
