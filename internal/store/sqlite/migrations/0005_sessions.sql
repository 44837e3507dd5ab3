-- 0005: owner's page sessions signed out before they expired, refused
-- until then.

CREATE TABLE ended_sessions (
	id         TEXT    NOT NULL PRIMARY KEY,
	expires_at INTEGER NOT NULL
) STRICT;

CREATE INDEX ended_sessions_expires ON ended_sessions (expires_at);
