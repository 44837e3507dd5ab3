-- 0018: budgets over windows other than the calendar month (day, week,
-- rolling N days), the tallies charged against them by bucket (a day, or
-- a week for "week", named by its first day YYYY-MM-DD), what each call in
-- flight holds against them, and token-rate limits per box and principal.
-- Money is integer micro-dollars; a principal is '' for the box as a whole.

CREATE TABLE window_budgets (
	box          TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal    TEXT    NOT NULL,
	win          TEXT    NOT NULL,
	limit_micros INTEGER NOT NULL CHECK (limit_micros >= 0),
	updated_at   INTEGER NOT NULL,
	PRIMARY KEY (box, principal, win)
) STRICT;

-- A window's tallies are raised only by one conditional UPDATE each,
-- made while its budget's row is locked, so that concurrent calls never
-- hold more than its limit between them.
CREATE TABLE window_tallies (
	box       TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal TEXT    NOT NULL,
	win       TEXT    NOT NULL,
	bucket    TEXT    NOT NULL,
	spent     INTEGER NOT NULL DEFAULT 0,
	reserved  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (box, principal, win, bucket)
) STRICT;

CREATE TABLE window_holds (
	reservation INTEGER NOT NULL,
	box         TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal   TEXT    NOT NULL,
	win         TEXT    NOT NULL,
	bucket      TEXT    NOT NULL,
	amount      INTEGER NOT NULL,
	PRIMARY KEY (reservation, principal, win)
) STRICT;

CREATE TABLE rate_limits (
	box        TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal  TEXT    NOT NULL,
	input_tpm  INTEGER NOT NULL CHECK (input_tpm >= 0),
	output_tpm INTEGER NOT NULL CHECK (output_tpm >= 0),
	rpm        INTEGER NOT NULL CHECK (rpm >= 0),
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (box, principal)
) STRICT;

-- What each replica counted against the rate limits over the last minute,
-- written by each about once a second (not once a request) and read by
-- the others; at is Unix milliseconds by the writer's clock.
CREATE TABLE rate_counts (
	key           TEXT    NOT NULL,
	replica       TEXT    NOT NULL,
	requests      INTEGER NOT NULL,
	input_tokens  INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	at            INTEGER NOT NULL,
	PRIMARY KEY (key, replica)
) STRICT;

-- Budget alerts given: a budget's spending crossed threshold percent of
-- its limit in period (a month YYYY-MM, or a window's bucket YYYY-MM-DD);
-- the key makes each crossing alerted once whichever replica saw it.
CREATE TABLE budget_alerts (
	box       TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal TEXT    NOT NULL,
	win       TEXT    NOT NULL,
	period    TEXT    NOT NULL,
	threshold INTEGER NOT NULL,
	limit_micros INTEGER NOT NULL,
	spent     INTEGER NOT NULL,
	at_micros INTEGER NOT NULL,
	PRIMARY KEY (box, principal, win, period, threshold)
) STRICT;
