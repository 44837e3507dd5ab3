-- 0006: held for another branch's migration; this file is removed when that branch is merged.
SELECT 1;
