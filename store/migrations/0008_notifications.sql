-- 0008 notifications to a team's webhook endpoints: the endpoints, and a durable
-- outbox of deliveries written in the same transaction as what they announce (a plan
-- transition, a repository connection's change), so none is lost on a crash and none
-- is sent for a change that did not commit.
-- Portable SQL only (see the package documentation).

-- secret is sealed with the service's credentials key; the clear text is shown once.
-- An endpoint that kept failing is paused (paused_at set) and receives no attempts
-- until resumed.
CREATE TABLE notification_endpoints (
    id                   TEXT NOT NULL PRIMARY KEY,
    team_id              TEXT NOT NULL REFERENCES teams (id),
    url                  TEXT NOT NULL,
    description          TEXT NOT NULL DEFAULT '',
    sealed_secret        TEXT NOT NULL,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    paused_at            BIGINT,
    pause_reason         TEXT NOT NULL DEFAULT '',
    created_at           BIGINT NOT NULL
);

CREATE INDEX notification_endpoints_team ON notification_endpoints (team_id);

-- One row per (event, endpoint). Deliveries sharing an ordering_key (a plan, a
-- connection) are sent in seq order: one is attempted only when no earlier one of
-- its key to the same endpoint is still pending. state: pending, delivered.
CREATE TABLE notification_deliveries (
    id               TEXT NOT NULL PRIMARY KEY,
    endpoint_id      TEXT NOT NULL REFERENCES notification_endpoints (id),
    team_id          TEXT NOT NULL REFERENCES teams (id),
    event            TEXT NOT NULL,
    ordering_key     TEXT NOT NULL,
    seq              BIGINT NOT NULL,
    payload          TEXT NOT NULL,
    state            TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    lease_expires_at BIGINT,
    last_status      INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    delivered_at     BIGINT
);

CREATE INDEX notification_deliveries_due ON notification_deliveries (state, next_attempt_at);
CREATE INDEX notification_deliveries_order ON notification_deliveries (endpoint_id, ordering_key, seq);
