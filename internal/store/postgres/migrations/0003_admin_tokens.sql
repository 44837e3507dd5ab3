-- 0003: the admin API's tokens, kept as SHA-256 hashes.

CREATE TABLE admin_tokens (
	id         text        NOT NULL PRIMARY KEY,
	hash       text        NOT NULL UNIQUE,
	name       text        NOT NULL,
	created_at timestamptz NOT NULL
);
