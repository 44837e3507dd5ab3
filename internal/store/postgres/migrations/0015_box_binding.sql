-- 0015: where a box's token is taken from, and its lifetimes.
-- bound_from is the source CIDRs its token is bound to, comma-separated
-- ('' for any address). token_ttl is the lifetime each of its tokens is
-- given as it is minted, in microseconds (0: none); token_expires_at is
-- when its token stops being taken (NULL: never). old_token_hash is the
-- token it had before its last rotation, still taken until
-- old_token_until (a rotation's grace); both NULL when there is none.

ALTER TABLE boxes ADD COLUMN bound_from text NOT NULL DEFAULT '';
ALTER TABLE boxes ADD COLUMN token_ttl bigint NOT NULL DEFAULT 0;
ALTER TABLE boxes ADD COLUMN token_expires_at timestamptz;
ALTER TABLE boxes ADD COLUMN old_token_hash text;
ALTER TABLE boxes ADD COLUMN old_token_until timestamptz;
CREATE UNIQUE INDEX boxes_old_token_hash ON boxes (old_token_hash);
