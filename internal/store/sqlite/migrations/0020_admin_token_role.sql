-- 0020: what an admin token may do. 'operator' acts; 'viewer' reads only
-- (the admin API's GET routes and the owner's page, changing nothing).
-- The tokens made before it were all operators' and stay so.

ALTER TABLE admin_tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'operator' CHECK (role IN ('operator', 'viewer'));
