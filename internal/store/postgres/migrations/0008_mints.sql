-- 0008: a secret's kind (the broker mints or signs with it), and the state
-- of a minted secret: its rotated refresh token (sealed), its last
-- token's expiry, and why its last mint was refused.

ALTER TABLE secrets ADD COLUMN kind text NOT NULL DEFAULT '';

CREATE TABLE secret_mints (
	box        text        NOT NULL,
	name       text        NOT NULL,
	of         text        NOT NULL,
	sealed     bytea,
	expires_at timestamptz,
	failure    text        NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (box, name),
	FOREIGN KEY (box, name) REFERENCES secrets (box, name) ON DELETE CASCADE
);
