-- 0003: the admin API's tokens, kept as SHA-256 hashes.

CREATE TABLE admin_tokens (
	id         TEXT    NOT NULL PRIMARY KEY,
	hash       TEXT    NOT NULL UNIQUE,
	name       TEXT    NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;
