-- 0002: budgets, the tallies charged against them, reservations for calls
-- in flight, and measured usage. Money is integer micro-dollars (millionths
-- of a US dollar); a month is its UTC calendar month, written YYYY-MM; a
-- principal is '' for none (a tally or budget of the box as a whole).

CREATE TABLE budgets (
	box          TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal    TEXT    NOT NULL,
	limit_micros INTEGER NOT NULL CHECK (limit_micros >= 0),
	updated_at   INTEGER NOT NULL,
	PRIMARY KEY (box, principal)
) STRICT;

-- tallies are raised only by one conditional UPDATE each (Reserve), so
-- concurrent calls can never hold more than a budget's limit between them.
CREATE TABLE tallies (
	box       TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal TEXT    NOT NULL,
	month     TEXT    NOT NULL,
	spent     INTEGER NOT NULL DEFAULT 0,
	reserved  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (box, principal, month)
) STRICT;

CREATE TABLE reservations (
	id        INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
	box       TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal TEXT    NOT NULL,
	month     TEXT    NOT NULL,
	amount    INTEGER NOT NULL,
	at        INTEGER NOT NULL
) STRICT;

CREATE INDEX reservations_at ON reservations (at);

CREATE TABLE usage (
	box                TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	month              TEXT    NOT NULL,
	payer_kind         TEXT    NOT NULL,
	principal          TEXT    NOT NULL,
	model              TEXT    NOT NULL,
	calls              INTEGER NOT NULL,
	unpriced           INTEGER NOT NULL,
	unmeasured         INTEGER NOT NULL,
	input_tokens       INTEGER NOT NULL,
	output_tokens      INTEGER NOT NULL,
	cache_write_tokens INTEGER NOT NULL,
	cache_read_tokens  INTEGER NOT NULL,
	cost               INTEGER NOT NULL,
	PRIMARY KEY (box, month, payer_kind, principal, model)
) STRICT;
