-- 0007 API token scopes: what a token may do (read, change, admin), a comma-separated
-- list in a fixed order. Tokens made before scopes existed keep working with all of
-- them, which the default gives every existing row.
-- Portable SQL only (see the package documentation).

ALTER TABLE api_tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT 'read,change,admin';
