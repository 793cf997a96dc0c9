-- 0014 base moves a completed check could not judge: a check whose judgement of the
-- base moves while it ran failed (GitHub did not answer, say) keeps that it is owed,
-- so the next push to its base branch judges it, and its page says so meanwhile.
-- Portable SQL only (see the package documentation).

ALTER TABLE pull_checks ADD COLUMN moves_pending INTEGER NOT NULL DEFAULT 0;
