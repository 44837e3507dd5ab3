-- 0010: what each audit entry's answer weighed and cost: bytes is the
-- answer body's size as sent to the box, cost_micros the call's measured
-- cost in micro-dollars as the spend meter priced it (0 for a request no
-- model call was priced for). Entries kept before have 0 for both.

ALTER TABLE audit ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0;
