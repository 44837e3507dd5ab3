-- 0016: what a secret may be spent on: its rules, one "METHOD PATTERN" a
-- line ('' for none: every method and path), and each box's rate for it,
-- N/PERIOD ('' for none).

ALTER TABLE secrets ADD COLUMN rules text NOT NULL DEFAULT '';
ALTER TABLE secrets ADD COLUMN rate text NOT NULL DEFAULT '';
