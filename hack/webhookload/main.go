// Command webhookload measures the durable webhook inbox: it sends signed deliveries
// to the webhook route and reports how many were accepted per second and the
// latency of the 202 answer (p50, p99), then how fast the inbox workers drain the
// backlog.
//
// By default it builds the service in-process (service.New, as serve does) and serves
// its routes on a loopback port, over the database given with -db (a temporary SQLite
// file when none is given; for PostgreSQL pass a throwaway database, as the
// deliveries stay in it). With -target
// it sends to an already running server instead (then only acceptance is measured).
// Targets must be on loopback, and both the count and the duration are bounded.
//
//	go run ./hack/webhookload -n 5000 -c 16
//	go run ./hack/webhookload -db postgres://postgres@127.0.0.1:5432/load?sslmode=disable
//	go run ./hack/webhookload -target http://127.0.0.1:8080/webhooks/github -secret-file hook.secret
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/handler"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/service"
	"github.com/kukie/kukie-gitops/store"
)

// Bounds that keep a run from turning into a flood.
const (
	maxCount       = 200_000
	maxDuration    = 10 * time.Minute
	maxConcurrency = 256
)

type options struct {
	target       string
	secretFile   string
	dbURL        string
	count        int
	duration     time.Duration
	concurrency  int
	payloadBytes int
	workers      int
}

func main() {
	var o options
	flag.StringVar(&o.target, "target", "", "webhook URL of a running server (loopback only); empty: start the route in-process")
	flag.StringVar(&o.secretFile, "secret-file", "", "file holding the target's webhook secret (with -target)")
	flag.StringVar(&o.dbURL, "db", "", "database for the in-process route: sqlite:PATH or postgres://... (default: a temporary SQLite file)")
	flag.IntVar(&o.count, "n", 5000, fmt.Sprintf("deliveries to send (at most %d)", maxCount))
	flag.DurationVar(&o.duration, "duration", time.Minute, fmt.Sprintf("stop sending after this long (at most %s)", maxDuration))
	flag.IntVar(&o.concurrency, "c", 16, fmt.Sprintf("concurrent senders (at most %d)", maxConcurrency))
	flag.IntVar(&o.payloadBytes, "payload-bytes", 4096, "approximate payload size")
	flag.IntVar(&o.workers, "workers", handler.DefaultWorkers, "inbox workers for the drain (PostgreSQL; SQLite always uses one)")
	flag.Parse()
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "webhookload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	switch {
	case o.count < 1 || o.count > maxCount:
		return fmt.Errorf("-n must be between 1 and %d", maxCount)
	case o.duration <= 0 || o.duration > maxDuration:
		return fmt.Errorf("-duration must be positive and at most %s", maxDuration)
	case o.concurrency < 1 || o.concurrency > maxConcurrency:
		return fmt.Errorf("-c must be between 1 and %d", maxConcurrency)
	}
	if o.target != "" {
		if err := requireLoopback(o.target); err != nil {
			return err
		}
		raw, err := os.ReadFile(o.secretFile)
		if err != nil {
			return fmt.Errorf("read -secret-file: %w", err)
		}
		res := send(ctx, o, o.target, secret.New(strings.TrimSpace(string(raw))))
		res.print(out, "target "+o.target)
		return nil
	}
	return runInProcess(ctx, o, out)
}

// requireLoopback refuses targets that are not this machine.
func requireLoopback(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Errorf("parse -target: %w", err)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-target %s is not a loopback address; this tool only loads this machine", host)
}

func runInProcess(ctx context.Context, o options, out io.Writer) error {
	dbURL := o.dbURL
	if dbURL == "" {
		dir, err := os.MkdirTemp("", "webhookload-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dbURL = "sqlite:" + filepath.Join(dir, "load.db")
	}
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		return err
	}

	hookSecret := secret.New(randomHex(20))
	target, stop, err := serveRoute(ctx, db, hookSecret)
	if err != nil {
		return err
	}
	defer stop()
	res := send(ctx, o, target, hookSecret)
	res.print(out, fmt.Sprintf("in-process route on %s", db.Dialect()))

	// The backlog is now in the inbox; measure how fast workers empty it. The
	// handler does nothing, so this is the inbox's own cost: claim, dispatch, record.
	noop := &noopHandler{}
	inbox, err := handler.NewInbox(db, handler.InboxOptions{Workers: o.workers, PollInterval: 50 * time.Millisecond}, noop)
	if err != nil {
		return err
	}
	drainCtx, stopDrain := context.WithTimeout(ctx, maxDuration)
	defer stopDrain()
	start := time.Now()
	done := make(chan struct{})
	go func() { inbox.Run(drainCtx); close(done) }()
	for noop.count.Load() < int64(res.accepted) && drainCtx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	stopDrain()
	<-done
	workers := o.workers
	if db.Dialect() == store.SQLite {
		workers = 1
	}
	fmt.Fprintf(out, "drain: %d deliveries in %s with %d worker(s) = %.0f deliveries/s\n",
		noop.count.Load(), elapsed.Round(time.Millisecond), workers, float64(noop.count.Load())/elapsed.Seconds())
	return nil
}

// serveRoute serves the service as serve builds it (dev profile, no GitHub App) over
// db on a loopback port, with only its handler serving: its own inbox does not run, so
// the backlog stays for the drain. It returns the webhook URL and the function that
// stops the server.
func serveRoute(ctx context.Context, db *store.DB, hookSecret secret.Secret) (string, func(), error) {
	cfg := config.Default()
	cfg.GitHub.WebhookSecret = hookSecret
	svc, err := service.New(ctx, cfg, db, zerolog.New(io.Discard))
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: server.DefaultReadHeaderTimeout}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	return "http://" + ln.Addr().String() + webhook.Path, func() { _ = hs.Close(); <-served }, nil
}

type noopHandler struct{ count atomic.Int64 }

func (h *noopHandler) Handles() []string { return []string{"push"} }

func (h *noopHandler) Handle(context.Context, string, string, []byte) error {
	h.count.Add(1)
	return nil
}

type result struct {
	accepted, failed int
	elapsed          time.Duration
	latencies        []time.Duration
	firstError       string
}

func (r result) print(out io.Writer, what string) {
	slices.Sort(r.latencies)
	fmt.Fprintf(out, "%s: %d accepted, %d failed in %s = %.0f accepted/s; ack latency p50 %s p99 %s max %s\n",
		what, r.accepted, r.failed, r.elapsed.Round(time.Millisecond), float64(r.accepted)/r.elapsed.Seconds(),
		percentile(r.latencies, 0.50), percentile(r.latencies, 0.99), percentile(r.latencies, 1))
	if r.firstError != "" {
		fmt.Fprintf(out, "first failure: %s\n", r.firstError)
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i].Round(10 * time.Microsecond)
}

// send posts signed push deliveries from o.concurrency senders until o.count were
// sent or o.duration has passed.
func send(ctx context.Context, o options, target string, hookSecret secret.Secret) result {
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency, MaxConnsPerHost: o.concurrency},
	}
	pad := strings.Repeat("x", max(0, o.payloadBytes-200))
	var next atomic.Int64
	var mu sync.Mutex
	res := result{latencies: make([]time.Duration, 0, o.count)}
	start := time.Now()
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(o.count) {
					return
				}
				body, _ := json.Marshal(map[string]any{
					"ref": "refs/heads/main", "after": randomHex(20),
					"installation": map[string]int64{"id": 1}, "sequence": i, "padding": pad,
				})
				took, err := deliver(ctx, client, target, hookSecret, uuid.NewString(), body)
				mu.Lock()
				if err != nil {
					res.failed++
					if res.firstError == "" {
						res.firstError = err.Error()
					}
				} else {
					res.accepted++
					res.latencies = append(res.latencies, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// deliver sends one signed push delivery with the id and answers how long its 202 took.
func deliver(ctx context.Context, client *http.Client, target string, hookSecret secret.Secret, id string, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	mac := hmac.New(sha256.New, []byte(hookSecret.Reveal()))
	mac.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	took := time.Since(start)
	if res.StatusCode != http.StatusAccepted {
		return 0, &statusError{status: res.StatusCode}
	}
	return took, nil
}

// statusError is an answer other than 202.
type statusError struct{ status int }

func (e *statusError) Error() string {
	return "status " + strconv.Itoa(e.status) + " " + http.StatusText(e.status)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
