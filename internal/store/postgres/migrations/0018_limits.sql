-- 0018: budgets over windows other than the calendar month (day, week,
-- rolling N days), the tallies charged against them by bucket (a day, or
-- a week for "week", named by its first day YYYY-MM-DD), what each call in
-- flight holds against them, and token-rate limits per box and principal.
-- Money is integer micro-dollars; a principal is '' for the box as a whole.

CREATE TABLE window_budgets (
	box          text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal    text    NOT NULL,
	win          text    NOT NULL,
	limit_micros bigint NOT NULL CHECK (limit_micros >= 0),
	updated_at   timestamptz NOT NULL,
	PRIMARY KEY (box, principal, win)
);

-- A window's tallies are raised only by one conditional UPDATE each,
-- made while its budget's row is locked, so that concurrent calls never
-- hold more than its limit between them.
CREATE TABLE window_tallies (
	box       text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal text    NOT NULL,
	win       text    NOT NULL,
	bucket    text    NOT NULL,
	spent     bigint NOT NULL DEFAULT 0,
	reserved  bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (box, principal, win, bucket)
);

CREATE TABLE window_holds (
	reservation bigint NOT NULL,
	box         text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal   text    NOT NULL,
	win         text    NOT NULL,
	bucket      text    NOT NULL,
	amount      bigint NOT NULL,
	PRIMARY KEY (reservation, principal, win)
);

CREATE TABLE rate_limits (
	box        text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal  text    NOT NULL,
	input_tpm  bigint NOT NULL CHECK (input_tpm >= 0),
	output_tpm bigint NOT NULL CHECK (output_tpm >= 0),
	rpm        bigint NOT NULL CHECK (rpm >= 0),
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (box, principal)
);

-- What each replica counted against the rate limits over the last minute,
-- written by each about once a second (not once a request) and read by
-- the others; at is Unix milliseconds by the writer's clock.
CREATE TABLE rate_counts (
	key           text    NOT NULL,
	replica       text    NOT NULL,
	requests      bigint NOT NULL,
	input_tokens  bigint NOT NULL,
	output_tokens bigint NOT NULL,
	at            bigint NOT NULL,
	PRIMARY KEY (key, replica)
);

-- Budget alerts given: a budget's spending crossed threshold percent of
-- its limit in period (a month YYYY-MM, or a window's bucket YYYY-MM-DD);
-- the key makes each crossing alerted once whichever replica saw it.
CREATE TABLE budget_alerts (
	box       text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	principal text    NOT NULL,
	win       text    NOT NULL,
	period    text    NOT NULL,
	threshold bigint NOT NULL,
	limit_micros bigint NOT NULL,
	spent     bigint NOT NULL,
	at_micros bigint NOT NULL,
	PRIMARY KEY (box, principal, win, period, threshold)
);
