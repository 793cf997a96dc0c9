-- 0003 change pipeline: plans (one per change request), their event history and the
-- per-file locks that keep two open pull requests off the same file.
-- Portable SQL only (see the package documentation).

-- A plan's mutable columns are updated with optimistic concurrency on version; every
-- update writes one plan_events row whose seq is the new version.
CREATE TABLE plans (
    code             TEXT NOT NULL PRIMARY KEY,
    team_id          TEXT NOT NULL REFERENCES teams (id),
    idempotency_key  TEXT,
    cluster          TEXT NOT NULL,
    target_api_version TEXT NOT NULL,
    target_kind      TEXT NOT NULL,
    target_namespace TEXT NOT NULL DEFAULT '',
    target_name      TEXT NOT NULL,
    change_json      TEXT NOT NULL,
    reason           TEXT NOT NULL DEFAULT '',
    requested_by     TEXT NOT NULL DEFAULT '',
    path             TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL,
    status_reason    TEXT NOT NULL DEFAULT '',
    error_code       TEXT NOT NULL DEFAULT '',
    failed_step      TEXT NOT NULL DEFAULT '',
    repo             TEXT NOT NULL DEFAULT '',
    installation_id  BIGINT NOT NULL DEFAULT 0,
    base_branch      TEXT NOT NULL DEFAULT '',
    base_sha         TEXT NOT NULL DEFAULT '',
    commit_sha       TEXT NOT NULL DEFAULT '',
    head_sha         TEXT NOT NULL DEFAULT '',
    branch           TEXT NOT NULL DEFAULT '',
    pr_number        BIGINT NOT NULL DEFAULT 0,
    pr_url           TEXT NOT NULL DEFAULT '',
    check_run_id     BIGINT NOT NULL DEFAULT 0,
    check_run_url    TEXT NOT NULL DEFAULT '',
    merge_sha        TEXT NOT NULL DEFAULT '',
    waiting_on       TEXT NOT NULL DEFAULT '',
    rollback_of      TEXT NOT NULL DEFAULT '',
    rolled_back_by   TEXT NOT NULL DEFAULT '',
    deploy_deadline_at BIGINT,
    payload          TEXT NOT NULL DEFAULT '{}',
    claimed_by       TEXT NOT NULL DEFAULT '',
    claim_expires_at BIGINT,
    version          BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    UNIQUE (team_id, idempotency_key)
);

CREATE INDEX plans_team_created ON plans (team_id, created_at);
CREATE INDEX plans_status ON plans (status);
CREATE INDEX plans_repo_pr ON plans (repo, pr_number);
CREATE INDEX plans_repo_branch ON plans (repo, branch);

CREATE TABLE plan_events (
    plan_code   TEXT NOT NULL REFERENCES plans (code),
    seq         BIGINT NOT NULL,
    actor       TEXT NOT NULL DEFAULT '',
    from_status TEXT NOT NULL DEFAULT '',
    to_status   TEXT NOT NULL DEFAULT '',
    step        TEXT NOT NULL DEFAULT '',
    message     TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (plan_code, seq)
);

-- One open plan per (repository, file). The primary key is the lock.
CREATE TABLE file_locks (
    repo        TEXT NOT NULL,
    path        TEXT NOT NULL,
    plan_code   TEXT NOT NULL REFERENCES plans (code),
    acquired_at BIGINT NOT NULL,
    PRIMARY KEY (repo, path)
);

CREATE INDEX file_locks_plan ON file_locks (plan_code);
