-- 0006 webhook retries that do not use up a delivery: attempts that GitHub's rate
-- limits deferred, and those before GitHub's redelivery or an operator's replay of a
-- failed delivery, do not count toward giving up. Done deliveries are pruned by
-- their finish time.
-- Portable SQL only (see the package documentation).

-- Attempts that do not count toward the inbox's limit; attempts itself keeps growing
-- because claims are fenced by it.
ALTER TABLE webhook_deliveries ADD COLUMN free_attempts INTEGER NOT NULL DEFAULT 0;

CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (state, finished_at);
