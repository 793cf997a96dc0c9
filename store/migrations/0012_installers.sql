-- 0012 who GitHub says created each installation of the App, from the signed
-- installation "created" webhook: its sender (the person who installed it) and, when
-- an organization owner approved a member's request, that member (requester; 0 and ''
-- otherwise). The setup callback binds an installation only for one of them: the
-- installation id on the callback is the caller's to choose, the webhook is not.
-- Kept for installations no team has bound yet. Portable SQL only (see the package
-- documentation).

CREATE TABLE installation_installers (
    installation_id BIGINT NOT NULL PRIMARY KEY,
    sender_id       BIGINT NOT NULL,
    sender_login    TEXT NOT NULL,
    requester_id    BIGINT NOT NULL DEFAULT 0,
    requester_login TEXT NOT NULL DEFAULT '',
    recorded_at     BIGINT NOT NULL
);
