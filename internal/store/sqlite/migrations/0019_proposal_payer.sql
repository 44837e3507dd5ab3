-- 0019: the payer a budget proposal was refused for (as chant-payer
-- writes it), so that its approval lets only a call of that payer past
-- the budget; '' for the other kinds, and for budget proposals made
-- before it, whose approvals then match no call.

ALTER TABLE proposals ADD COLUMN payer TEXT NOT NULL DEFAULT '';
