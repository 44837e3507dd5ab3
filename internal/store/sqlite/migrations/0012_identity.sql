-- 0012: the store's identity, made once, by the first start that brings
-- the store to this version: a replica's journal and spool name the store
-- they belong to, and are replayed into no other.

CREATE TABLE identity (
	one INTEGER NOT NULL PRIMARY KEY CHECK (one = 1),
	id  TEXT    NOT NULL
) STRICT;

INSERT INTO identity (one, id) VALUES (1, lower(hex(randomblob(16))));
