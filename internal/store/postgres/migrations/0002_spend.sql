-- 0002: budgets, the tallies charged against them, reservations for calls
-- in flight, and measured usage. Money is integer micro-dollars (millionths
-- of a US dollar); a month is its UTC calendar month, written YYYY-MM; a
-- principal is '' for none (a tally or budget of the box as a whole).

CREATE TABLE budgets (
	box          text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal    text    NOT NULL,
	limit_micros bigint  NOT NULL CHECK (limit_micros >= 0),
	updated_at   timestamptz NOT NULL,
	PRIMARY KEY (box, principal)
);

-- tallies are raised only by one conditional UPDATE each (Reserve), so
-- concurrent calls can never hold more than a budget's limit between them.
CREATE TABLE tallies (
	box       text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal text    NOT NULL,
	month     text    NOT NULL,
	spent     bigint  NOT NULL DEFAULT 0,
	reserved  bigint  NOT NULL DEFAULT 0,
	PRIMARY KEY (box, principal, month)
);

CREATE TABLE reservations (
	id        bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	box       text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal text    NOT NULL,
	month     text    NOT NULL,
	amount    bigint  NOT NULL,
	at        timestamptz NOT NULL
);

CREATE INDEX reservations_at ON reservations (at);

CREATE TABLE usage (
	box                text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	month              text    NOT NULL,
	payer_kind         text    NOT NULL,
	principal          text    NOT NULL,
	model              text    NOT NULL,
	calls              bigint  NOT NULL,
	unpriced           bigint  NOT NULL,
	unmeasured         bigint  NOT NULL,
	input_tokens       bigint  NOT NULL,
	output_tokens      bigint  NOT NULL,
	cache_write_tokens bigint  NOT NULL,
	cache_read_tokens  bigint  NOT NULL,
	cost               bigint  NOT NULL,
	PRIMARY KEY (box, month, payer_kind, principal, model)
);
