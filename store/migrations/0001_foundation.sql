-- 0001 foundation: teams, their API tokens, the webhook inbox and the audit trail.
-- Portable SQL only (see the package documentation): TEXT ids made in Go, times as
-- BIGINT Unix milliseconds.

CREATE TABLE teams (
    id         TEXT NOT NULL PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

-- Tokens are stored as the hex SHA-256 of the token; the clear text is shown once.
CREATE TABLE api_tokens (
    id           TEXT NOT NULL PRIMARY KEY,
    team_id      TEXT NOT NULL REFERENCES teams (id),
    name         TEXT NOT NULL DEFAULT '',
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    revoked_at   BIGINT
);

CREATE INDEX api_tokens_team_id ON api_tokens (team_id);

-- The durable webhook inbox: one row per X-GitHub-Delivery, processed by workers.
-- state: pending, processing, done, failed.
CREATE TABLE webhook_deliveries (
    delivery_id      TEXT NOT NULL PRIMARY KEY,
    event            TEXT NOT NULL,
    action           TEXT NOT NULL DEFAULT '',
    installation_id  BIGINT,
    payload          TEXT NOT NULL,
    state            TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    received_at      BIGINT NOT NULL,
    lease_expires_at BIGINT,
    finished_at      BIGINT
);

CREATE INDEX webhook_deliveries_state_received ON webhook_deliveries (state, received_at);

-- Append-only record of who did what. detail is a JSON object.
CREATE TABLE audit_events (
    id           TEXT NOT NULL PRIMARY KEY,
    team_id      TEXT REFERENCES teams (id),
    actor        TEXT NOT NULL,
    action       TEXT NOT NULL,
    subject_type TEXT NOT NULL DEFAULT '',
    subject_id   TEXT NOT NULL DEFAULT '',
    detail       TEXT NOT NULL DEFAULT '{}',
    created_at   BIGINT NOT NULL
);

CREATE INDEX audit_events_team_created ON audit_events (team_id, created_at);
CREATE INDEX audit_events_subject ON audit_events (subject_type, subject_id);
