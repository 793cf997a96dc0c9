package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/lib/pq"
	"modernc.org/sqlite"
)

// Readiness answers "is the database reachable and answering" apart from "is the
// pool busy". The work of the service shares one pool (20 connections on
// PostgreSQL, one on SQLite); a ping through it waits for a free connection, so a
// replica busy past the readiness deadline would be reported unready, and a load
// balancer would drain every replica at the moment they are busiest. The checks
// below therefore run on a pool of their own with a single connection (one more
// connection per replica on the server), and how busy the shared pool is becomes
// a warning (PoolBusy), never a failure.

// Close closes the database's connections, the health connection included.
func (db *DB) Close() error {
	err := db.DB.Close()
	if db.health != nil {
		err = errors.Join(err, db.health.Close())
	}
	return err
}

// healthView is the database seen through the health connection, for the
// readiness checks alone.
func (db *DB) healthView() *DB {
	if db.health == nil {
		return db
	}
	return &DB{DB: db.health, dialect: db.dialect, waits: db.waits}
}

// PingReady reports whether the database is reachable and answers a query,
// through the health connection, so work holding every connection of the shared
// pool does not fail it. A failure is a *HealthError.
func (db *DB) PingReady(ctx context.Context) error {
	var one int
	if err := db.healthView().GetContext(ctx, &one, "SELECT 1"); err != nil {
		return healthError("query the database", err)
	}
	return nil
}

// SchemaReady is CheckSchema through the health connection. A failure to read the
// schema is a *HealthError; pending migrations are reported as CheckSchema does.
func (db *DB) SchemaReady(ctx context.Context) error {
	err := db.healthView().CheckSchema(ctx)
	if err != nil && !strings.HasPrefix(err.Error(), "migrations not applied") {
		return healthError("read the schema", err)
	}
	return err
}

// PoolBusy describes the shared pool when every connection is in use and work
// waited for one since the last call, and is empty otherwise: that is worth a
// warning but says nothing about the database itself. A pool merely in full use is
// not reported: on SQLite, whose pool is one connection, that is any query.
func (db *DB) PoolBusy() string {
	st := db.Stats()
	waited := st.WaitCount - db.waits.Swap(st.WaitCount)
	if st.MaxOpenConnections == 0 || st.InUse < st.MaxOpenConnections || waited <= 0 {
		return ""
	}
	return fmt.Sprintf("all %d connections of the pool are in use, and %d requests waited for one since the last check", st.InUse, waited)
}

// HealthError is a failed readiness check: Err is the full error, for the log;
// Reason is a short class of failure that names no host, user or schema, so it may
// be shown on an unauthenticated endpoint.
type HealthError struct {
	Reason string
	Err    error
}

func (e *HealthError) Error() string { return e.Err.Error() }
func (e *HealthError) Unwrap() error { return e.Err }

// PublicReason is the reason a readiness answer may show.
func (e *HealthError) PublicReason() string { return e.Reason }

func healthError(what string, err error) error {
	return &HealthError{Reason: healthReason(err), Err: fmt.Errorf("%s: %w", what, err)}
}

// healthReason classifies why the database did not answer, by error type where
// the drivers give one.
func healthReason(err error) string {
	var pqErr *pq.Error
	var liteErr *sqlite.Error
	var netErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "the database did not answer within the readiness deadline"
	case errors.Is(err, context.Canceled):
		return "the check was cancelled"
	case errors.Is(err, sql.ErrConnDone), err.Error() == "sql: database is closed":
		return "the connection to the database is closed"
	case errors.As(err, &pqErr):
		return "the database refused the query (" + string(pqErr.Code.Name()) + ")"
	case errors.As(err, &liteErr):
		return "the database file cannot be read (" + sqliteCodeName(liteErr.Code()) + ")"
	case errors.As(err, &dnsErr):
		return "the database's host name does not resolve"
	case errors.As(err, &netErr):
		return "the database cannot be reached"
	default:
		return "the database did not answer"
	}
}

// sqliteCodeName is the primary result code of a SQLite error, as SQLite names it.
func sqliteCodeName(code int) string {
	msg := sqlite.ErrorCodeString[code&0xff]
	if msg == "" {
		return fmt.Sprintf("code %d", code)
	}
	return msg
}
