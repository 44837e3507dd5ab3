-- 0016: what a secret may be spent on: its rules, one "METHOD PATTERN" a
-- line ('' for none: every method and path), and each box's rate for it,
-- N/PERIOD ('' for none).

ALTER TABLE secrets ADD COLUMN rules TEXT NOT NULL DEFAULT '';
ALTER TABLE secrets ADD COLUMN rate TEXT NOT NULL DEFAULT '';
