// Package notify tells a team's webhook endpoints what happened: every plan
// transition (plan.transition: code, idempotency key, state, reason, links) and every
// change of a repository connection (connection.changed: connected, pending_approval,
// revoked, disconnected).
//
// The store writes each notification into a durable outbox in the same transaction
// as the change it announces, so none is lost on a crash and none is sent for a
// change that did not commit. This package owns the endpoints' API (registration
// with a secret shown once, listing, removal, resume, the delivery log) and the
// Worker that delivers the outbox: signed (Sign, Verify), retried with backoff, in
// order per plan, and paused when an endpoint keeps failing. It never decides what
// happened; it only tells.
package notify
