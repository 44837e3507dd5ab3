-- 0013: how each box's model calls used the prompt cache, by payer kind
-- and pool entry ('' for a call not paid from the operator's pool).
-- cache_usage keeps month sums (the month of the hour a call settled in),
-- as usage does. cache_hours keeps the last 24 hours in a ring: slot is
-- the hour's number since the Unix epoch modulo 24, hour that number; a
-- slot's row is overwritten when its slot comes round again, so each box,
-- payer kind and entry keeps at most 24 rows.

CREATE TABLE cache_usage (
	box                TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	month              TEXT    NOT NULL,
	payer_kind         TEXT    NOT NULL,
	entry              TEXT    NOT NULL,
	calls              INTEGER NOT NULL,
	input_tokens       INTEGER NOT NULL,
	cache_write_tokens INTEGER NOT NULL,
	cache_read_tokens  INTEGER NOT NULL,
	PRIMARY KEY (box, month, payer_kind, entry)
) STRICT;

CREATE TABLE cache_hours (
	box                TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	payer_kind         TEXT    NOT NULL,
	entry              TEXT    NOT NULL,
	slot               INTEGER NOT NULL,
	hour               INTEGER NOT NULL,
	calls              INTEGER NOT NULL,
	input_tokens       INTEGER NOT NULL,
	cache_write_tokens INTEGER NOT NULL,
	cache_read_tokens  INTEGER NOT NULL,
	PRIMARY KEY (box, payer_kind, entry, slot)
) STRICT;
