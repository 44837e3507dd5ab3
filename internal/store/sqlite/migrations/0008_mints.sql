-- 0008: a secret's kind (the broker mints or signs with it), and the state
-- of a minted secret: its rotated refresh token (sealed), its last
-- token's expiry, and why its last mint was refused.

ALTER TABLE secrets ADD COLUMN kind TEXT NOT NULL DEFAULT '';

CREATE TABLE secret_mints (
	box        TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	of         TEXT    NOT NULL,
	sealed     BLOB,
	expires_at INTEGER,
	failure    TEXT    NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (box, name),
	FOREIGN KEY (box, name) REFERENCES secrets (box, name) ON DELETE CASCADE
) STRICT;
