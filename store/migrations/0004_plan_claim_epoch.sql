-- 0004 plan claim fencing: every claim of a plan gets a new epoch, so a worker whose
-- claim ran out and was taken over is refused when it tries to record a step; each
-- plan event names the worker that recorded it under a claim.
-- Portable SQL only (see the package documentation).

ALTER TABLE plans ADD COLUMN claim_epoch BIGINT NOT NULL DEFAULT 0;

-- Empty for events recorded outside a claim (webhooks, people through the API).
ALTER TABLE plan_events ADD COLUMN worker TEXT NOT NULL DEFAULT '';
