-- 0001: boxbroker's first schema. Sealed values are bytea; a declaration is
-- kept as the bytes it came as.

CREATE TABLE boxes (
	name            text        NOT NULL PRIMARY KEY,
	token_hash      text        NOT NULL UNIQUE,
	created_at      timestamptz NOT NULL,
	consent         boolean     NOT NULL,
	paused          boolean     NOT NULL,
	payer_kind      text        NOT NULL CHECK (payer_kind IN ('shared', 'owner')),
	payer_principal text        NOT NULL
);

CREATE TABLE declarations (
	box text        NOT NULL PRIMARY KEY REFERENCES boxes (name) ON DELETE CASCADE,
	doc bytea       NOT NULL,
	at  timestamptz NOT NULL
);

CREATE TABLE credentials (
	id         text        NOT NULL PRIMARY KEY,
	sealed     bytea       NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE TABLE secrets (
	box        text        NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	name       text        NOT NULL,
	host       text        NOT NULL,
	sealed     bytea       NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (box, name)
);

CREATE TABLE feedback (
	id    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	box   text        NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	at    timestamptz NOT NULL,
	words text[]      NOT NULL,
	body  bytea       NOT NULL
);

CREATE INDEX feedback_box ON feedback (box, id);

CREATE TABLE resources (
	kind text        NOT NULL,
	id   text        NOT NULL,
	box  text        NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	at   timestamptz NOT NULL,
	PRIMARY KEY (kind, id)
);

CREATE INDEX resources_box ON resources (box);

CREATE TABLE grants (
	id         text        NOT NULL PRIMARY KEY,
	hash       text        NOT NULL UNIQUE,
	box        text        NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal  text        NOT NULL,
	created_at timestamptz NOT NULL,
	expires_at timestamptz,
	revoked_at timestamptz
);

CREATE INDEX grants_box ON grants (box, created_at);

-- changes is the log every replica's cache polls. Each write adds its rows
-- last in its own transaction, holding an advisory lock until it commits,
-- so that seq order is commit order and a reader never skips a row.
CREATE TABLE changes (
	seq  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind text        NOT NULL,
	key  text        NOT NULL,
	at   timestamptz NOT NULL
);

CREATE INDEX changes_at ON changes (at);
