package notify_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/notify"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// receiver is a loopback endpoint: it records every delivery and answers with the
// status its script gives (200 when the script has run out).
type receiver struct {
	mu       sync.Mutex
	got      []received
	script   []int
	srv      *httptest.Server
	attempts int
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, script ...int) *receiver {
	r := &receiver{script: script}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.attempts++
		status := http.StatusOK
		if len(r.script) > 0 {
			status, r.script = r.script[0], r.script[1:]
		}
		if status/100 == 2 {
			r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) delivered() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type env struct {
	db     *store.DB
	box    *sealed.Box
	team   store.Team
	admin  secret.Secret
	read   secret.Secret
	api    *httptest.Server
	clock  *clock
	worker func() *notify.Worker // a fresh worker each call, as after a restart
}

func newEnv(t *testing.T, db *store.DB) *env {
	t.Helper()
	ctx := context.Background()
	box, err := sealed.New(bytes.Repeat([]byte{7}, sealed.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, box: box, clock: &clock{now: time.Now().Add(time.Hour).Truncate(time.Second)}}
	if e.team, err = db.CreateTeam(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if _, e.admin, err = db.CreateAPIToken(ctx, e.team.ID, "ops"); err != nil {
		t.Fatal(err)
	}
	if _, e.read, err = db.CreateAPIToken(ctx, e.team.ID, "chat", store.ScopeRead, store.ScopeChange); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	// The receivers are loopback servers: the dev profile's allowances.
	(&notify.API{Store: db, Credentials: box, AllowHTTP: true, AllowPrivateNetworks: true}).Mount(srv)
	e.api = httptest.NewServer(srv.Handler())
	t.Cleanup(e.api.Close)
	e.worker = func() *notify.Worker {
		return &notify.Worker{Store: db, Credentials: box, Now: e.clock.Now, PauseAfter: 3, FirstBackoff: 10 * time.Second,
			AllowPrivateNetworks: true}
	}
	return e
}

// register adds an endpoint through the API and returns its id and secret.
func (e *env) register(t *testing.T, url string) (string, string) {
	t.Helper()
	status, body := servicetest.Do(t, e.api, "POST", "/api/v1/notifications/endpoints", e.admin, map[string]any{"url": url, "description": "chat"})
	var out struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if status != http.StatusCreated || json.Unmarshal(body, &out) != nil || out.ID == "" || !strings.HasPrefix(out.Secret, notify.SecretPrefix) {
		t.Fatalf("register %s = %d %s", url, status, body)
	}
	return out.ID, out.Secret
}

func (e *env) drain(t *testing.T) int {
	t.Helper()
	n, err := e.worker().Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// move walks a plan through statuses as the pipeline records them.
func (e *env) move(t *testing.T, p store.Plan, statuses ...string) store.Plan {
	t.Helper()
	for _, s := range statuses {
		p.Status = s
		if s == "pr_open" {
			p.PRNumber, p.PRURL = 7, "https://github.com/acme/deploy/pull/7"
		}
		var err error
		if p, err = e.db.UpdatePlan(context.Background(), p, store.PlanEvent{Actor: "system", Step: s, Message: "now " + s}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (e *env) newPlan(t *testing.T, code string) store.Plan {
	t.Helper()
	p, _, err := e.db.CreatePlan(context.Background(), store.Plan{Code: code, TeamID: e.team.ID, IdempotencyKey: "key-" + code, Cluster: "prod",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}, Status: "deciding",
		Reason: "traffic", RequestedBy: "alice"}, store.PlanEvent{Actor: "team:shop", Step: "request"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func states(t *testing.T, got []received, key string) []string {
	t.Helper()
	var out []string
	for _, r := range got {
		var n store.PlanNotification
		if err := json.Unmarshal(r.body, &n); err != nil {
			t.Fatal(err)
		}
		if n.Plan.Code == key {
			out = append(out, n.Plan.State)
		}
	}
	return out
}

// The outbox is written with each transition: transitions committed while no
// worker runs (a crash right after them) are all delivered by the next worker, in
// order, signed; a transition that does not commit sends nothing.
func TestDeliveriesSurviveACrashSignedAndInOrder(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		rcv := newReceiver(t)
		_, key := e.register(t, rcv.srv.URL+"/hooks")

		p := e.newPlan(t, "plan1")
		p = e.move(t, p, "preparing", "pr_open", "merged", "deploying", "deployed")
		// A write from a stale copy is refused, and announces nothing.
		stale := p
		stale.Version--
		stale.Status = "failed"
		if _, err := db.UpdatePlan(context.Background(), stale, store.PlanEvent{Step: "stale"}); err == nil {
			t.Fatal("a stale update was written")
		}
		// The first worker dies after leasing a delivery, before sending it.
		if claimed, err := db.ClaimDueNotifications(context.Background(), e.clock.Now(), time.Minute, 1); err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		if n := e.drain(t); n != 0 {
			t.Fatalf("%d attempts while the dead worker's lease holds the plan's first delivery; order must wait", n)
		}
		e.clock.advance(2 * time.Minute)
		e.drain(t)

		got := rcv.delivered()
		want := []string{"deciding", "preparing", "pr_open", "merged", "deploying", "deployed"}
		if s := states(t, got, "plan1"); strings.Join(s, ",") != strings.Join(want, ",") {
			t.Fatalf("delivered states %v, want %v", s, want)
		}
		for _, r := range got {
			if err := notify.Verify([]byte(key), r.header.Get(notify.HeaderTimestamp), r.header.Get(notify.HeaderSignature), r.body, e.clock.Now(), notify.DefaultTolerance); err != nil {
				t.Fatalf("delivery does not verify: %v\n%s", err, r.body)
			}
			if r.header.Get(notify.HeaderEvent) != store.EventPlanTransition || r.header.Get(notify.HeaderDelivery) == "" {
				t.Fatalf("headers %v", r.header)
			}
		}
		var prOpen store.PlanNotification
		if err := json.Unmarshal(got[2].body, &prOpen); err != nil {
			t.Fatal(err)
		}
		if prOpen.Plan.IdempotencyKey != "key-plan1" || prOpen.Links.PullRequest != "https://github.com/acme/deploy/pull/7" ||
			prOpen.Links.Change != "/api/v1/changes/plan1" || prOpen.Plan.From != "preparing" || prOpen.Plan.Reason != "now pr_open" {
			t.Fatalf("pr_open notification = %+v", prOpen)
		}
		if n := e.drain(t); n != 0 {
			t.Fatalf("%d attempts after everything was delivered", n)
		}
	})
}

// A failed delivery is retried after its backoff, and later deliveries of the same
// plan wait for it; other plans do not. An endpoint that keeps failing is paused
// and receives nothing until resumed.
func TestRetriesOrderAndPause(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		rcv := newReceiver(t, 500, 502)
		id, _ := e.register(t, rcv.srv.URL)

		p1 := e.newPlan(t, "plan1")
		e.move(t, p1, "preparing")
		if n := e.drain(t); n != 1 || len(rcv.delivered()) != 0 {
			t.Fatalf("first drain: %d attempts, %d delivered; want one failed attempt (plan1's second event waits)", n, len(rcv.delivered()))
		}
		if n := e.drain(t); n != 0 {
			t.Fatalf("%d attempts before the backoff passed", n)
		}
		p2 := e.newPlan(t, "plan2")
		e.drain(t) // plan2 does not wait for plan1: its first delivery meets the 502
		e.clock.advance(10 * time.Second)
		e.drain(t)
		got := rcv.delivered()
		if s := states(t, got, "plan1"); strings.Join(s, ",") != "deciding,preparing" {
			t.Fatalf("plan1 delivered %v", s)
		}
		if s := states(t, got, "plan2"); strings.Join(s, ",") != "deciding" {
			t.Fatalf("plan2 delivered %v", s)
		}

		// The delivery log shows the failures and the successes.
		status, body := servicetest.Do(t, e.api, "GET", "/api/v1/notifications/endpoints/"+id+"/deliveries", e.admin, nil)
		if status != 200 || !strings.Contains(string(body), `"last_status":200`) || !strings.Contains(string(body), `"attempts":2`) {
			t.Fatalf("delivery log = %d %s", status, body)
		}

		// Failing three times in a row pauses the endpoint.
		rcv.mu.Lock()
		rcv.script = []int{500, 500, 500, 500, 500, 500}
		rcv.mu.Unlock()
		e.move(t, p2, "preparing", "refused")
		for range 5 {
			e.drain(t)
			e.clock.advance(time.Hour)
		}
		rcv.mu.Lock()
		attempts := rcv.attempts
		rcv.mu.Unlock()
		if attempts != 5+3 {
			t.Fatalf("%d attempts in all, want 5 before (2 failed, 3 delivered) and 3 until the pause", attempts)
		}
		status, body = servicetest.Do(t, e.api, "GET", "/api/v1/notifications/endpoints", e.admin, nil)
		if status != 200 || !strings.Contains(string(body), `"pause_reason":"paused after 3 failed deliveries in a row`) {
			t.Fatalf("endpoints = %d %s, want it paused with the reason", status, body)
		}
		rcv.mu.Lock()
		rcv.script = nil
		rcv.mu.Unlock()
		if status, body := servicetest.Do(t, e.api, "POST", "/api/v1/notifications/endpoints/"+id+"/resume", e.admin, nil); status != 200 {
			t.Fatalf("resume = %d %s", status, body)
		}
		e.drain(t)
		if s := states(t, rcv.delivered(), "plan2"); strings.Join(s, ",") != "deciding,preparing,refused" {
			t.Fatalf("plan2 after resume delivered %v", s)
		}
	})
}

func TestConnectionChangesAreNotified(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		rcv := newReceiver(t)
		e.register(t, rcv.srv.URL)
		c, err := db.CreateCluster(ctx, store.Cluster{TeamID: e.team.ID, Name: "prod", Access: store.ClusterInCluster})
		if err != nil {
			t.Fatal(err)
		}
		repo := "https://github.com/acme/deploy"
		if _, _, err := db.ConnectRepo(ctx, c.ID, repo, store.ConnectionPendingApproval); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.ConnectRepo(ctx, c.ID, repo, store.ConnectionConnected); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.ConnectRepo(ctx, c.ID, repo, store.ConnectionConnected); err != nil {
			t.Fatal(err)
		}
		if err := db.DisconnectRepo(ctx, c.ID, repo); err != nil {
			t.Fatal(err)
		}
		e.drain(t)
		var got []string
		for _, r := range rcv.delivered() {
			var n store.ConnectionNotification
			if err := json.Unmarshal(r.body, &n); err != nil || n.Event != store.EventConnectionChanged || n.Cluster != "prod" || n.Repo != repo {
				t.Fatalf("notification %s: %v", r.body, err)
			}
			got = append(got, n.Status)
		}
		if strings.Join(got, ",") != "pending_approval,connected,disconnected" {
			t.Fatalf("connection notifications %v, want one per change of status", got)
		}
	})
}

func TestEndpointsAPI(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db)
	id, secretText := e.register(t, "https://chat.example.com/hooks")
	status, body := servicetest.Do(t, e.api, "GET", "/api/v1/notifications/endpoints", e.admin, nil)
	if status != 200 || !strings.Contains(string(body), id) || strings.Contains(string(body), secretText) || strings.Contains(string(body), "sealed") {
		t.Fatalf("list = %d %s; want the endpoint without its secret", status, body)
	}
	var stored string
	if err := db.GetContext(context.Background(), &stored, db.Rebind(`SELECT sealed_secret FROM notification_endpoints WHERE id = ?`), id); err != nil || strings.Contains(stored, secretText) {
		t.Fatalf("stored secret %q: want it sealed", stored)
	}
	for name, tc := range map[string]struct {
		url  string
		code string
	}{
		"not a url":   {"::", "invalid_endpoint"},
		"ftp":         {"ftp://chat.example.com", "invalid_endpoint"},
		"no host":     {"https://", "invalid_endpoint"},
		"credentials": {"https://user:pw@chat.example.com", "invalid_endpoint"},
		// Taken before, every delivery then failing to dial.
		"port past 65535": {"https://chat.example.com:99999/hooks", "url port 99999 is not a port"},
		"port 0":          {"https://chat.example.com:0/hooks", "url port 0 is not a port"},
	} {
		if status, body := servicetest.Do(t, e.api, "POST", "/api/v1/notifications/endpoints", e.admin, map[string]any{"url": tc.url}); status != 400 || !strings.Contains(string(body), tc.code) {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
	// The description is bounded in characters, as its reason says: 200 of another
	// script are taken (refused before, as "longer than 200 characters", past 200
	// bytes), 201 are not.
	if status, body := servicetest.Do(t, e.api, "POST", "/api/v1/notifications/endpoints", e.admin,
		map[string]any{"url": "https://chat.example.com/cjk", "description": strings.Repeat("界", 200)}); status != http.StatusCreated {
		t.Errorf("200 characters of three bytes each: %d %s, want 201", status, body)
	}
	if status, body := servicetest.Do(t, e.api, "POST", "/api/v1/notifications/endpoints", e.admin,
		map[string]any{"url": "https://chat.example.com/cjk", "description": strings.Repeat("界", 201)}); status != 400 ||
		!strings.Contains(string(body), "description is 201 characters long, at most 200 are taken") {
		t.Errorf("201 characters: %d %s, want 400 naming the count and the bound", status, body)
	}
	if status, body := servicetest.Do(t, e.api, "POST", "/api/v1/notifications/endpoints", e.read, map[string]any{"url": "https://x.example.com"}); status != 403 || !strings.Contains(string(body), "insufficient_scope") {
		t.Errorf("read,change token: %d %s", status, body)
	}

	// Outside the dev profile only https is accepted; without a key nothing is stored.
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	(&notify.API{Store: db, Credentials: &sealed.Box{}}).Mount(srv)
	strict := httptest.NewServer(srv.Handler())
	defer strict.Close()
	if status, body := servicetest.Do(t, strict, "POST", "/api/v1/notifications/endpoints", e.admin, map[string]any{"url": "http://chat.example.com"}); status != 400 || !strings.Contains(string(body), "https") {
		t.Errorf("http in production: %d %s", status, body)
	}
	if status, body := servicetest.Do(t, strict, "POST", "/api/v1/notifications/endpoints", e.admin, map[string]any{"url": "https://chat.example.com"}); status != 503 || !strings.Contains(string(body), "credentials_key_missing") {
		t.Errorf("no key: %d %s", status, body)
	}

	// Another team neither sees nor removes it.
	other, err := db.CreateTeam(context.Background(), "other")
	if err != nil {
		t.Fatal(err)
	}
	_, otherToken, err := db.CreateAPIToken(context.Background(), other.ID, "ops")
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range [][2]string{{"DELETE", "/api/v1/notifications/endpoints/" + id}, {"GET", "/api/v1/notifications/endpoints/" + id + "/deliveries"}, {"POST", "/api/v1/notifications/endpoints/" + id + "/resume"}} {
		if status, _ := servicetest.Do(t, e.api, req[0], req[1], otherToken, nil); status != 404 {
			t.Errorf("%s %s by another team = %d, want 404", req[0], req[1], status)
		}
	}
	if status, body := servicetest.Do(t, e.api, "DELETE", "/api/v1/notifications/endpoints/"+id, e.admin, nil); status != 204 {
		t.Fatalf("delete = %d %s", status, body)
	}
	if status, _ := servicetest.Do(t, e.api, "DELETE", "/api/v1/notifications/endpoints/"+id, e.admin, nil); status != 404 {
		t.Fatalf("second delete = %d, want 404", status)
	}
}

func TestVerify(t *testing.T) {
	key, body, now := []byte("kwh_secret"), []byte(`{"event":"plan.transition"}`), time.Unix(1_700_000_000, 0)
	sig := notify.Sign(key, now.Unix(), body)
	ts := "1700000000"
	if err := notify.Verify(key, ts, sig, body, now, notify.DefaultTolerance); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	for name, tc := range map[string]struct {
		key  []byte
		ts   string
		sig  string
		body []byte
		now  time.Time
	}{
		"other body":      {key, ts, sig, []byte(`{"event":"x"}`), now},
		"other key":       {[]byte("kwh_other"), ts, sig, body, now},
		"moved timestamp": {key, "1700000001", sig, body, now},
		"replayed later":  {key, ts, sig, body, now.Add(6 * time.Minute)},
		"not a timestamp": {key, "yesterday", sig, body, now},
		"unversioned":     {key, ts, strings.TrimPrefix(sig, "v1="), body, now},
	} {
		if err := notify.Verify(tc.key, tc.ts, tc.sig, tc.body, tc.now, notify.DefaultTolerance); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestEndpointSecretAnswerIsNotCached: the answer that shows an endpoint's secret,
// the only time it is shown, must not be kept by a cache on the way, like the other
// answers that hand out a secret (repository tokens, install states).
func TestEndpointSecretAnswerIsNotCached(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db)
	req, err := http.NewRequest(http.MethodPost, e.api.URL+"/api/v1/notifications/endpoints", strings.NewReader(`{"url":"https://chat.example.com/hooks"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.admin.Reveal())
	res, err := e.api.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var created struct {
		Secret string `json:"secret"`
	}
	if err := json.NewDecoder(res.Body).Decode(&created); err != nil || res.StatusCode != http.StatusCreated || created.Secret == "" {
		t.Fatalf("register = %d (%v), secret %q", res.StatusCode, err, created.Secret)
	}
	if got := res.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q on the answer with the endpoint's secret, want no-store", got)
	}
}

// TestAnEndpointsStatusLineIsLoggedBounded: the status line an endpoint answers is
// its own to write, of any length and bytes; the delivery log keeps it cut to a
// few hundred bytes of valid UTF-8 without control characters (failed before: 20
// KiB stored for every attempt, cut nowhere, and on PostgreSQL its NUL, or a cut
// through a character, failed the attempt's record, so the worker stopped with an
// error at each drain).
func TestAnEndpointsStatusLineIsLoggedBounded(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		status := "HTTP/1.1 500 " + strings.Repeat("é", 10<<10) + "\x00\x1b[2J"
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(30 * time.Second))
					req, err := http.ReadRequest(bufio.NewReader(c))
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					_, _ = io.WriteString(c, status+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
				}()
			}
		}()
		id, _ := e.register(t, "http://"+ln.Addr().String()+"/hooks")
		e.newPlan(t, "plan1")
		if n := e.drain(t); n == 0 {
			t.Fatal("nothing was sent")
		}
		ds, err := db.ListNotificationDeliveries(context.Background(), e.team.ID, id, 10)
		if err != nil || len(ds) == 0 {
			t.Fatalf("deliveries = %v, %v", ds, err)
		}
		got := ds[0].LastError
		if !strings.HasPrefix(got, "the endpoint answered 500 éé") || len(got) > 400 || !utf8.ValidString(got) || strings.ContainsFunc(got, unicode.IsControl) {
			t.Fatalf("logged error (%d bytes, valid UTF-8 %v) %.80q…, want the status cut, valid and without control characters", len(got), utf8.ValidString(got), got)
		}
	})
}
