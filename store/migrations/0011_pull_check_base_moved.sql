-- 0011 pull request checks whose base branch moved: a completed check of a pull
-- request keeps the base commit it was first told moved under it, once, so replicas
-- and repeated push deliveries mark its check run stale once.
-- Portable SQL only (see the package documentation).

ALTER TABLE pull_checks ADD COLUMN base_moved_sha TEXT NOT NULL DEFAULT '';
