-- 0013 base moves beyond a completed kukie/render run: a check keeps the id of its
-- kukie/policy run and, apart from the render's mark (0011), the base commit a push
-- that changed the policy file first moved it to, so that run is marked stale once;
-- and the newest base commit a push moved a check's base to while it still ran, which
-- the check judges when it completes.
-- Portable SQL only (see the package documentation).

ALTER TABLE pull_checks ADD COLUMN policy_check_run_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pull_checks ADD COLUMN policy_moved_sha TEXT NOT NULL DEFAULT '';
ALTER TABLE pull_checks ADD COLUMN moved_while_running_sha TEXT NOT NULL DEFAULT '';
