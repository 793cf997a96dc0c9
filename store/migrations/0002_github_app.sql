-- 0002 GitHub App core: install states, installations bound to teams and the
-- repositories they can see, clusters, and which repositories each cluster deploys
-- from. Portable SQL only (see the package documentation).

-- One-time states for the installation setup callback. Only the SHA-256 of the state
-- is kept; used_at is set when a callback consumes it, so a state works once.
CREATE TABLE install_states (
    state_hash TEXT NOT NULL PRIMARY KEY,
    team_id    TEXT NOT NULL REFERENCES teams (id),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);

CREATE INDEX install_states_team ON install_states (team_id);

-- An installation of the App bound to the team that installed it. The unique
-- installation_id is what makes a second team's bind fail: one installation, one
-- team. A request still waiting for an organization owner has no installation id yet
-- (NULL, which UNIQUE allows many times). status: active, pending_approval,
-- suspended, deleted.
CREATE TABLE installations (
    id              TEXT NOT NULL PRIMARY KEY,
    installation_id BIGINT UNIQUE,
    team_id         TEXT NOT NULL REFERENCES teams (id),
    account_login   TEXT NOT NULL DEFAULT '',
    account_type    TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);

CREATE INDEX installations_team ON installations (team_id);

-- Repositories a bound installation can access, kept current by the
-- installation_repositories webhook and refreshed from GitHub on demand. repo is the
-- canonical URL (https://host/owner/name, lower case).
CREATE TABLE installation_repos (
    installation_id BIGINT NOT NULL REFERENCES installations (installation_id),
    repo            TEXT NOT NULL,
    github_repo_id  BIGINT NOT NULL DEFAULT 0,
    added_at        BIGINT NOT NULL,
    PRIMARY KEY (installation_id, repo)
);

CREATE INDEX installation_repos_repo ON installation_repos (repo);

-- A team's cluster. access: kubeconfig (credentials holds the sealed kubeconfig,
-- base64 of AES-GCM ciphertext) or in_cluster (the service's own service account).
CREATE TABLE clusters (
    id          TEXT NOT NULL PRIMARY KEY,
    team_id     TEXT NOT NULL REFERENCES teams (id),
    name        TEXT NOT NULL,
    access      TEXT NOT NULL,
    credentials TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    UNIQUE (team_id, name)
);

-- Which repositories a cluster's Applications may be changed through. status:
-- connected, pending_approval (the team's installation awaits an owner), revoked
-- (the installation lost access; status_reason says how).
CREATE TABLE repo_connections (
    id              TEXT NOT NULL PRIMARY KEY,
    cluster_id      TEXT NOT NULL REFERENCES clusters (id),
    repo            TEXT NOT NULL,
    status          TEXT NOT NULL,
    status_reason   TEXT NOT NULL DEFAULT '',
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    UNIQUE (cluster_id, repo)
);

CREATE INDEX repo_connections_repo ON repo_connections (repo);

-- Failed webhook deliveries wait before their next attempt (exponential backoff);
-- NULL means due now.
ALTER TABLE webhook_deliveries ADD COLUMN next_attempt_at BIGINT;
