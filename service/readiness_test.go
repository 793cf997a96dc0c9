package service

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestReadinessWithThePoolExhausted: work holding every connection of the shared
// pool in open transactions (past the readiness deadline), with more work waiting
// for one, leaves the replica ready, its answer warning that the pool is busy,
// since the database itself answers; the pool merely in full use is no warning, and
// once the work ends the warning goes. A ping through the shared pool waited for a
// free connection until the deadline and answered 503.
func TestReadinessWithThePoolExhausted(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		svc := readinessService(t, db)
		txs := holdPool(t, db)
		if code, answer := readyzAnswer(t, svc); code != http.StatusOK || len(answer.Warnings) != 0 {
			t.Fatalf("pool in full use, nothing waiting: GET /readyz = %d %+v, want 200 without warnings", code, answer)
		}
		waiting := waitForConnection(t, db)
		code, answer := readyzAnswer(t, svc)
		if code != http.StatusOK {
			t.Fatalf("pool exhausted: GET /readyz = %d %+v, want 200", code, answer)
		}
		if len(answer.Warnings) != 1 || !strings.HasPrefix(answer.Warnings[0], "database: all ") || !strings.Contains(answer.Warnings[0], "connections of the pool are in use") {
			t.Errorf("warnings %q, want the busy pool", answer.Warnings)
		}
		for _, tx := range txs {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
		}
		<-waiting
		if code, answer := readyzAnswer(t, svc); code != http.StatusOK || len(answer.Warnings) != 0 {
			t.Fatalf("pool free: GET /readyz = %d %+v, want 200 without warnings", code, answer)
		}
	})
}

// TestReadinessDatabaseGone: a database that stops answering makes the replica
// unready with a reason that names the check and the class of failure, never the
// host: PostgreSQL stopped behind the address the service connects to (its
// connections cut, new ones refused), a SQLite database closed.
func TestReadinessDatabaseGone(t *testing.T) {
	t.Run(string(store.SQLite), func(t *testing.T) {
		db := storetest.SQLite(t)
		svc := readinessService(t, db)
		if code, answer := readyzAnswer(t, svc); code != http.StatusOK {
			t.Fatalf("GET /readyz = %d %+v, want 200", code, answer)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		code, answer := readyzAnswer(t, svc)
		if code != http.StatusServiceUnavailable || !strings.HasPrefix(answer.Reason, "database: check failed (the connection to the database is closed)") {
			t.Fatalf("closed: GET /readyz = %d %+v, want 503 saying the connection is closed", code, answer)
		}
	})
	t.Run(string(store.Postgres), func(t *testing.T) {
		ctx := context.Background()
		direct := storetest.PostgresURL(t)
		u, err := url.Parse(direct)
		if err != nil {
			t.Fatal(err)
		}
		proxy := newTCPProxy(t, u.Host)
		u.Host = proxy.addr()
		db, err := store.Open(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		svc := readinessService(t, db)
		if code, answer := readyzAnswer(t, svc); code != http.StatusOK {
			t.Fatalf("GET /readyz = %d %+v, want 200", code, answer)
		}
		proxy.stop()
		code, answer := readyzAnswer(t, svc)
		if code != http.StatusServiceUnavailable || !strings.HasPrefix(answer.Reason, "database: check failed (the database cannot be reached)") {
			t.Fatalf("stopped: GET /readyz = %d %+v, want 503 saying the database cannot be reached", code, answer)
		}
		if strings.Contains(answer.Reason, proxy.addr()) {
			t.Errorf("reason %q names the database's address", answer.Reason)
		}
	})
}

func readinessService(t *testing.T, db *store.DB) *Service {
	t.Helper()
	cfg := config.Default()
	cfg.Pipeline.CacheDir = t.TempDir()
	svc, err := New(context.Background(), cfg, db, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// holdPool opens transactions on every connection of db's shared pool and holds
// them until the test ends or the caller rolls them back.
func holdPool(t *testing.T, db *store.DB) []*sqlx.Tx {
	t.Helper()
	ctx := context.Background()
	var txs []*sqlx.Tx
	for range db.Stats().MaxOpenConnections {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		txs = append(txs, tx)
	}
	if st := db.Stats(); st.InUse != st.MaxOpenConnections {
		t.Fatalf("%d of %d connections in use, want all", st.InUse, st.MaxOpenConnections)
	}
	return txs
}

// waitForConnection starts a query on db's exhausted pool and returns once it
// waits for a connection; the channel closes when the query has run.
func waitForConnection(t *testing.T, db *store.DB) <-chan struct{} {
	t.Helper()
	waits := db.Stats().WaitCount
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := db.ExecContext(context.Background(), "SELECT 1"); err != nil {
			t.Errorf("the waiting query: %v", err)
		}
	}()
	for db.Stats().WaitCount == waits {
		runtime.Gosched()
	}
	return done
}

type readyzBody struct {
	Status   string   `json:"status"`
	Warnings []string `json:"warnings"`
	Reason   string   `json:"reason"`
}

func readyzAnswer(t *testing.T, svc *Service) (int, readyzBody) {
	t.Helper()
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var answer readyzBody
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
		t.Fatalf("GET /readyz = %d %s: %v", rec.Code, rec.Body, err)
	}
	return rec.Code, answer
}

// tcpProxy forwards connections to a database server, and stops as a stopped
// server does: its listener closed, its connections cut.
type tcpProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pipe(client, server)
			go p.pipe(server, client)
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
