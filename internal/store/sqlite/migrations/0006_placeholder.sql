-- 0006 is held for another change; this placeholder does nothing and is
-- deleted when that change lands, so that versions run without a gap.
SELECT 1;
