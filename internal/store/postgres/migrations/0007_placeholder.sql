-- 0007: a placeholder, so that versions run without gaps on this branch.
-- The branch assigned 0007 replaces this file with its own migration.

SELECT 1;
