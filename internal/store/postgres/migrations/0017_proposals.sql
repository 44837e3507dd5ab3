-- 0017: kept for the proposals branch, whose migration takes this number.
SELECT 1;
