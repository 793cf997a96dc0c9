// Package store owns the service's persistent state: opening the database by URL
// (SQLite for a local run, PostgreSQL in production), the embedded schema migrations,
// and the queries over every table. Nothing outside this package writes SQL. The
// readiness checks (PingReady, SchemaReady) run on a connection of their own, apart
// from the pool the work shares, so a busy pool is reported (PoolBusy) and not taken
// for a database that does not answer.
//
// # One schema for two databases
//
// Every migration in migrations/ runs unchanged on SQLite and PostgreSQL, so new
// migrations must stay inside the portable subset both understand:
//
//   - Identifiers (ids) are TEXT primary keys generated in Go (NewID: time-ordered
//     UUIDv7), never SERIAL/AUTOINCREMENT, whose syntax differs between the two.
//   - Times are BIGINT columns holding Unix milliseconds in UTC, named *_at. Use
//     toMillis/fromMillis (and nullMillis for optional times). Neither database's
//     native timestamp type is portable through both drivers: SQLite has none, and
//     scanning PostgreSQL's TIMESTAMPTZ gives time.Time where SQLite gives a string.
//   - Booleans are INTEGER 0/1 with a NOT NULL DEFAULT; JSON documents are TEXT.
//   - Counters and GitHub numeric ids are BIGINT (both map it to int64).
//   - Text that can be absent is TEXT NOT NULL with the empty string as default,
//     unless "absent" and "empty" must be told apart; optional references are NULL.
//   - Write queries with ? placeholders and pass them through DB.Rebind (sqlx does
//     it for the helpers on DB and Tx). Conflicts surface as ErrConflict through
//     IsUniqueViolation, whichever driver reported them.
//   - Statements in a migration are plain DDL separated by semicolons; no
//     database-specific functions, no triggers, no partial indexes.
//
// Migrations are numbered NNNN_name.sql and applied in order, each in its own
// transaction, recorded in schema_migrations with a checksum so that an edited,
// already-applied migration is detected instead of silently diverging.
// Reserved numbers: 0001 foundation (teams, api_tokens, webhook_deliveries,
// audit_events), 0002 GitHub App core, 0003 change pipeline, 0004 plan claim
// fencing, 0005 skipped webhook deliveries, 0006 webhook redeliveries (free attempts,
// pruning by finish time), 0007 API token scopes, 0008 notification endpoints and
// their outbox of deliveries, 0009 pull request checks and the current check of each
// pull request, 0010 the webhook inbox's claim index, 0011 the base a pull request
// check was first told moved under it.
package store
