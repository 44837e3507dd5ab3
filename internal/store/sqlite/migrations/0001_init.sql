-- 0001: boxbroker's first schema. Times are UTC microseconds since the Unix
-- epoch; an optional time is NULL when unset. Sealed values are BLOBs.

CREATE TABLE boxes (
	name            TEXT    NOT NULL PRIMARY KEY,
	token_hash      TEXT    NOT NULL UNIQUE,
	created_at      INTEGER NOT NULL,
	consent         INTEGER NOT NULL CHECK (consent IN (0, 1)),
	paused          INTEGER NOT NULL CHECK (paused IN (0, 1)),
	payer_kind      TEXT    NOT NULL CHECK (payer_kind IN ('shared', 'owner')),
	payer_principal TEXT    NOT NULL
) STRICT;

CREATE TABLE declarations (
	box TEXT    NOT NULL PRIMARY KEY REFERENCES boxes (name) ON DELETE CASCADE,
	doc BLOB    NOT NULL,
	at  INTEGER NOT NULL
) STRICT;

CREATE TABLE credentials (
	id         TEXT    NOT NULL PRIMARY KEY,
	sealed     BLOB    NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE secrets (
	box        TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	name       TEXT    NOT NULL,
	host       TEXT    NOT NULL,
	sealed     BLOB    NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (box, name)
) STRICT;

CREATE TABLE feedback (
	id    INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
	box   TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	at    INTEGER NOT NULL,
	words TEXT    NOT NULL, -- JSON array of strings
	body  BLOB    NOT NULL
) STRICT;

CREATE INDEX feedback_box ON feedback (box, id);

CREATE TABLE resources (
	kind TEXT    NOT NULL,
	id   TEXT    NOT NULL,
	box  TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	at   INTEGER NOT NULL,
	PRIMARY KEY (kind, id)
) STRICT;

CREATE INDEX resources_box ON resources (box);

CREATE TABLE grants (
	id         TEXT    NOT NULL PRIMARY KEY,
	hash       TEXT    NOT NULL UNIQUE,
	box        TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal  TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER,
	revoked_at INTEGER
) STRICT;

CREATE INDEX grants_box ON grants (box, created_at);

-- changes is the log every replica's cache polls; each write adds its rows
-- in its own transaction.
CREATE TABLE changes (
	seq  INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
	kind TEXT    NOT NULL,
	key  TEXT    NOT NULL,
	at   INTEGER NOT NULL
) STRICT;

CREATE INDEX changes_at ON changes (at);
