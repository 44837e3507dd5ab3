-- 0013: how each box's model calls used the prompt cache, by payer kind
-- and pool entry ('' for a call not paid from the operator's pool).
-- cache_usage keeps month sums (the month of the hour a call settled in),
-- as usage does. cache_hours keeps the last 24 hours in a ring: slot is
-- the hour's number since the Unix epoch modulo 24, hour that number; a
-- slot's row is overwritten when its slot comes round again, so each box,
-- payer kind and entry keeps at most 24 rows.

CREATE TABLE cache_usage (
	box                text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	month              text    NOT NULL,
	payer_kind         text    NOT NULL,
	entry              text    NOT NULL,
	calls              bigint  NOT NULL,
	input_tokens       bigint  NOT NULL,
	cache_write_tokens bigint  NOT NULL,
	cache_read_tokens  bigint  NOT NULL,
	PRIMARY KEY (box, month, payer_kind, entry)
);

CREATE TABLE cache_hours (
	box                text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	payer_kind         text    NOT NULL,
	entry              text    NOT NULL,
	slot               bigint  NOT NULL,
	hour               bigint  NOT NULL,
	calls              bigint  NOT NULL,
	input_tokens       bigint  NOT NULL,
	cache_write_tokens bigint  NOT NULL,
	cache_read_tokens  bigint  NOT NULL,
	PRIMARY KEY (box, payer_kind, entry, slot)
);
