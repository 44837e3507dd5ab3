-- 0014: the body fields a secret names: top-level fields of a form or JSON
-- request body whose whole value, when it is the box's token, egress
-- replaces by the secret's value (an API that takes its key in the body,
-- such as an OAuth client_secret). Comma-separated; '' for none.

ALTER TABLE secrets ADD COLUMN body_fields text NOT NULL DEFAULT '';
