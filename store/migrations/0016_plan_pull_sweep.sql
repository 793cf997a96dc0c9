-- 0016 when the periodic check of open pull requests last read a plan's pull request
-- (GitHub does not deliver again a pull_request event the service missed): one
-- replica reads each one once an interval, and a restart keeps the count. NULL for a
-- plan whose pull request was never read so.
-- Portable SQL only (see the package documentation).

ALTER TABLE plans ADD COLUMN pull_swept_at BIGINT;
