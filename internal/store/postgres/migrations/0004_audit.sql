-- 0004: the audit log. box is '' for a request no box's token was
-- recognised on, and is no foreign key: a removed box's entries stay until
-- they are pruned.

CREATE TABLE audit (
	id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	box             text        NOT NULL,
	at              timestamptz NOT NULL,
	method          text        NOT NULL,
	route           text        NOT NULL,
	capability      text        NOT NULL,
	words           text[]      NOT NULL,
	status          integer     NOT NULL,
	reason          text        NOT NULL,
	message         text        NOT NULL,
	duration_us     bigint      NOT NULL,
	upstream_status integer     NOT NULL
);

CREATE INDEX audit_box_at ON audit (box, at);
CREATE INDEX audit_at ON audit (at);
