-- 0014: reserved for the secret store column of issue 40 A (branch
-- bodyfield), whose own 0014 takes this file's place when both are merged.
SELECT 1;
