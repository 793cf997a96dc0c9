-- 0010 the webhook inbox's claim walks an index in its own order: pending and
-- processing deliveries by (received_at, delivery_id), so a claim reads the few rows
-- it takes and not the whole backlog.
-- Portable SQL only (see the package documentation).

CREATE INDEX webhook_deliveries_claim ON webhook_deliveries (state, received_at, delivery_id);

-- Its leading columns make the older index redundant.
DROP INDEX webhook_deliveries_state_received;
