-- 0004: the audit log. box is "" for a request no box's token was
-- recognised on, and is no foreign key: a removed box's entries stay until
-- they are pruned.

CREATE TABLE audit (
	id              INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
	box             TEXT    NOT NULL,
	at              INTEGER NOT NULL,
	method          TEXT    NOT NULL,
	route           TEXT    NOT NULL,
	capability      TEXT    NOT NULL,
	words           TEXT    NOT NULL, -- JSON array of strings
	status          INTEGER NOT NULL,
	reason          TEXT    NOT NULL,
	message         TEXT    NOT NULL,
	duration_us     INTEGER NOT NULL,
	upstream_status INTEGER NOT NULL
) STRICT;

CREATE INDEX audit_box_at ON audit (box, at);
CREATE INDEX audit_at ON audit (at);
