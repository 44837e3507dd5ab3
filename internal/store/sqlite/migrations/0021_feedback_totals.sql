-- 0021: how many feedback batches each box keeps and their bodies' bytes,
-- kept by every write that adds or drops a batch, in that write, so that
-- the box's bound is checked at a cost that does not grow with what it
-- keeps. The row is written first in such a write: on PostgreSQL it
-- holds concurrent appends to the same box in turn. A box with no row
-- keeps nothing.

CREATE TABLE feedback_totals (
	box     TEXT    NOT NULL PRIMARY KEY REFERENCES boxes (name) ON DELETE CASCADE,
	batches INTEGER NOT NULL,
	bytes   INTEGER NOT NULL
) STRICT;

INSERT INTO feedback_totals (box, batches, bytes)
	SELECT box, COUNT(*), SUM(LENGTH(body)) FROM feedback GROUP BY box;
