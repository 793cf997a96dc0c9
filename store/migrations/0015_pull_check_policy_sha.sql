-- 0015 the commit a check's policy was read from: the default branch's commit, read
-- just before the check read its .kukie.yml there (so the policy is that commit's or
-- a later one's), so that a base move is judged for the policy from it rather than
-- from the pull request's base, and a push to the default branch the check was told
-- of by no one is found when it completes.
-- Portable SQL only (see the package documentation).

ALTER TABLE pull_checks ADD COLUMN policy_sha TEXT NOT NULL DEFAULT '';
