-- 0009 pull request checks: what each kukie/render check of a head the service did
-- not open computed (for its web page), and which check of a pull request or merge
-- queue entry is current, so a newer head supersedes an older check on every
-- replica, not only on the one that runs it.
-- Portable SQL only (see the package documentation).

-- One row per check of a head. state: running, completed, superseded, failed.
-- result is the check's outcome as JSON (masked cluster diffs per Application),
-- empty until it completes.
CREATE TABLE pull_checks (
    id              TEXT NOT NULL PRIMARY KEY,
    installation_id BIGINT NOT NULL,
    repo            TEXT NOT NULL,
    repo_url        TEXT NOT NULL DEFAULT '',
    check_key       TEXT NOT NULL,
    base_branch     TEXT NOT NULL,
    base_sha        TEXT NOT NULL,
    head_sha        TEXT NOT NULL,
    generation      BIGINT NOT NULL,
    state           TEXT NOT NULL,
    conclusion      TEXT NOT NULL DEFAULT '',
    note            TEXT NOT NULL DEFAULT '',
    check_run_id    BIGINT NOT NULL DEFAULT 0,
    result          TEXT NOT NULL DEFAULT '',
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);

CREATE INDEX pull_checks_key ON pull_checks (repo, check_key, generation);

-- The current check of each (repository, key): a check begins by taking the next
-- generation here, and a check whose id is no longer check_id was superseded (an
-- empty check_id: the pull request closed or the queue entry went away).
CREATE TABLE pull_check_keys (
    repo       TEXT NOT NULL,
    check_key  TEXT NOT NULL,
    generation BIGINT NOT NULL,
    check_id   TEXT NOT NULL,
    head_sha   TEXT NOT NULL,
    PRIMARY KEY (repo, check_key)
);
