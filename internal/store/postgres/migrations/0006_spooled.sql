-- 0006: the keys of spooled batches applied, so that a batch replayed
-- twice (after a crash mid-replay) is applied once.

CREATE TABLE spooled (
	key text        NOT NULL PRIMARY KEY,
	at  timestamptz NOT NULL
);

CREATE INDEX spooled_at ON spooled (at);
