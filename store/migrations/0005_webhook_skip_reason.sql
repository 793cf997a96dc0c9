-- 0005 skipped webhook deliveries: a delivery its handler cannot act on and never
-- will (a signed payload without the object the handler works on) is finished as
-- done, and keeps the reason it was skipped.
-- Portable SQL only (see the package documentation).

ALTER TABLE webhook_deliveries ADD COLUMN skip_reason TEXT NOT NULL DEFAULT '';
