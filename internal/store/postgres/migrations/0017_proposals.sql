-- 0017: proposals, refused requests a person may approve, and the asks
-- that open them. Times are Unix microseconds; approved_until and
-- decided_at are 0 for none.

CREATE TABLE proposals (
	id             text    PRIMARY KEY,
	box            text    NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	kind           text    NOT NULL,
	secret         text    NOT NULL,
	method         text    NOT NULL,
	path           text    NOT NULL,
	host           text    NOT NULL,
	model          text    NOT NULL,
	amount         bigint  NOT NULL,
	reason         text    NOT NULL,
	merge_key      text    NOT NULL,
	seen           bigint  NOT NULL,
	state          text    NOT NULL,
	created_at     bigint  NOT NULL,
	updated_at     bigint  NOT NULL,
	expires_at     bigint  NOT NULL,
	approved_until bigint  NOT NULL,
	decided_by     text    NOT NULL,
	decided_at     bigint  NOT NULL
);

CREATE UNIQUE INDEX proposals_pending ON proposals (box, merge_key) WHERE state = 'pending';
CREATE INDEX proposals_box_state ON proposals (box, state);

CREATE TABLE proposal_asks (
	box   text NOT NULL REFERENCES boxes (name) ON DELETE CASCADE,
	scope text NOT NULL,
	PRIMARY KEY (box, scope)
);
