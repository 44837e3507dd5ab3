-- 0017: proposals, refused requests a person may approve, and the asks
-- that open them. Times are Unix microseconds; approved_until and
-- decided_at are 0 for none.

CREATE TABLE proposals (
	id             TEXT    PRIMARY KEY,
	box            TEXT    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	kind           TEXT    NOT NULL,
	secret         TEXT    NOT NULL,
	method         TEXT    NOT NULL,
	path           TEXT    NOT NULL,
	host           TEXT    NOT NULL,
	model          TEXT    NOT NULL,
	amount         INTEGER NOT NULL,
	reason         TEXT    NOT NULL,
	merge_key      TEXT    NOT NULL,
	seen           INTEGER NOT NULL,
	state          TEXT    NOT NULL,
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	expires_at     INTEGER NOT NULL,
	approved_until INTEGER NOT NULL,
	decided_by     TEXT    NOT NULL,
	decided_at     INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX proposals_pending ON proposals (box, merge_key) WHERE state = 'pending';
CREATE INDEX proposals_box_state ON proposals (box, state);

CREATE TABLE proposal_asks (
	box   TEXT NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	scope TEXT NOT NULL,
	PRIMARY KEY (box, scope)
) STRICT;
