package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/handler"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// The child process of TestNoAcknowledgedDeliveryIsLostOnKill serves the webhook
// route over the database named by childDBEnv until it is killed; with childDrainEnv
// set (TestNoDeliveryIsLostWhenTheDrainIsKilled) it runs the inbox's workers instead.
const (
	childDBEnv     = "WEBHOOKLOAD_CHILD_DB"
	childSecretEnv = "WEBHOOKLOAD_CHILD_SECRET"
	childDrainEnv  = "WEBHOOKLOAD_CHILD_DRAIN"
	// childLease is the lease of the draining child's claims: what a restarted
	// process waits for before it takes them back.
	childLease = time.Second
)

func TestMain(m *testing.M) {
	if dbURL := os.Getenv(childDBEnv); dbURL != "" {
		if os.Getenv(childDrainEnv) != "" {
			os.Exit(drainChild(dbURL))
		}
		os.Exit(serveChild(dbURL, os.Getenv(childSecretEnv)))
	}
	os.Exit(m.Run())
}

// drainChild runs four inbox workers over dbURL, each delivery taking a millisecond,
// until it is killed.
func drainChild(dbURL string) int {
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	slow := &countingHandler{each: time.Millisecond}
	inbox, err := handler.NewInbox(db, handler.InboxOptions{Workers: 4, Lease: childLease, PollInterval: 10 * time.Millisecond}, slow)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("draining")
	inbox.Run(ctx) // until killed
	return 0
}

// countingHandler counts the push deliveries it handles by id, each taking each.
type countingHandler struct {
	each time.Duration
	mu   sync.Mutex
	seen map[string]int
}

func (h *countingHandler) Handles() []string { return []string{"push"} }

func (h *countingHandler) Handle(_ context.Context, _, id string, _ []byte) error {
	time.Sleep(h.each)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[string]int{}
	}
	h.seen[id]++
	return nil
}

func serveChild(dbURL, hookSecret string) int {
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	target, _, err := serveRoute(ctx, db, secret.New(hookSecret))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(target)
	select {} // until killed
}

// startChild runs the route in a child process over dbURL and returns its URL.
func startChild(t *testing.T, dbURL, hookSecret string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDBEnv+"="+dbURL, childSecretEnv+"="+hookSecret)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child did not start: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

// TestNoAcknowledgedDeliveryIsLostOnKill sends deliveries from 16 senders to the
// webhook route in a child process and kills it with SIGKILL under load. Every
// delivery answered 202 before the kill is in the database afterwards, and a restarted
// route recognises each of them as already received.
func TestNoAcknowledgedDeliveryIsLostOnKill(t *testing.T) {
	for name, dbURL := range map[string]func(testing.TB) string{"sqlite": storetest.SQLiteURL, "postgres": storetest.PostgresURL} {
		t.Run(name, func(t *testing.T) {
			url := dbURL(t)
			db := storetest.OpenURL(t, url)
			if _, err := db.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			hookSecret := randomHex(20)
			cmd, target := startChild(t, url, hookSecret)

			const killAfter = 300
			client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			var (
				mu    sync.Mutex
				acked []string
				sent  atomic.Int64
				wg    sync.WaitGroup
				kill  sync.Once
			)
			for range 16 {
				wg.Go(func() {
					for {
						id := fmt.Sprintf("kill-%d", sent.Add(1))
						body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "installation": map[string]int64{"id": 1}, "id": id})
						_, err := deliver(context.Background(), client, target, secret.New(hookSecret), id, body)
						if err != nil {
							return // the route is gone
						}
						mu.Lock()
						acked = append(acked, id)
						n := len(acked)
						mu.Unlock()
						if n >= killAfter {
							kill.Do(func() {
								if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
									t.Error(err)
								}
							})
						}
					}
				})
			}
			wg.Wait()
			_ = cmd.Wait()
			if len(acked) < killAfter {
				t.Fatalf("the route stopped after %d deliveries, before it was killed", len(acked))
			}

			ctx := context.Background()
			for _, id := range acked {
				if _, err := db.WebhookDeliveryByID(ctx, id); err != nil {
					t.Errorf("delivery %s was acknowledged but is not stored: %v", id, err)
				}
			}
			all, err := db.ListWebhookDeliveries(ctx, store.WebhookFilter{Limit: 100000})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d deliveries acknowledged, %d stored, %d sent", len(acked), len(all), sent.Load())
			if len(all) < len(acked) {
				t.Errorf("%d stored, fewer than the %d acknowledged", len(all), len(acked))
			}

			_, target = startChild(t, url, hookSecret)
			for _, id := range acked[:20] {
				_, err := deliver(ctx, client, target, secret.New(hookSecret), id, []byte(`{"id":"`+id+`"}`))
				var se *statusError
				if !errors.As(err, &se) || se.status != http.StatusConflict {
					t.Errorf("redelivery of %s after the restart: %v, want 409", id, err)
				}
			}
		})
	}
}

// TestNoDeliveryIsLostWhenTheDrainIsKilled kills the inbox's workers in a child
// process with SIGKILL while they drain a backlog. Every delivery is still in the
// inbox afterwards; a restarted process takes back the killed one's claims once their
// lease runs out and ends with every delivery done, without running again one the
// killed process had recorded done.
func TestNoDeliveryIsLostWhenTheDrainIsKilled(t *testing.T) {
	for name, dbURL := range map[string]func(testing.TB) string{"sqlite": storetest.SQLiteURL, "postgres": storetest.PostgresURL} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			url := dbURL(t)
			db := storetest.OpenURL(t, url)
			if _, err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			const total = 1000
			for i := range total {
				if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: fmt.Sprintf("drain-%04d", i), Event: "push",
					Payload: []byte(`{"ref":"refs/heads/main"}`)}); err != nil {
					t.Fatal(err)
				}
			}
			cmd, _ := startChild(t, url, "", childDrainEnv+"=1")
			// Killed once some batches are recorded and another is claimed and running.

			var progress store.InboxStats
			for deadline := time.Now().Add(time.Minute); ; {
				if time.Now().After(deadline) {
					t.Fatalf("the child did not get mid-drain within a minute: %v", progress.ByState)
				}
				var err error
				if progress, err = db.WebhookInboxStats(ctx); err != nil {
					t.Fatal(err)
				}
				if progress.ByState[store.DeliveryDone] >= 150 && progress.ByState[store.DeliveryProcessing] > 0 {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			at, err := db.ListWebhookDeliveries(ctx, store.WebhookFilter{Limit: 2 * total})
			if err != nil {
				t.Fatal(err)
			}
			doneAtKill := map[string]bool{}
			states := map[store.DeliveryState]int{}
			for _, d := range at {
				states[d.State]++
				doneAtKill[d.DeliveryID] = d.State == store.DeliveryDone
			}
			t.Logf("at the kill: %v", states)
			if len(at) != total || states[store.DeliveryFailed] != 0 {
				t.Fatalf("after the kill %d deliveries stored, by state %v; want all %d and none failed", len(at), states, total)
			}
			if states[store.DeliveryDone] == total {
				t.Fatal("the child drained everything before it was killed; the test did not kill it mid-drain")
			}

			restarted := &countingHandler{}
			inbox, err := handler.NewInbox(db, handler.InboxOptions{Workers: 4, Lease: time.Minute}, restarted)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(childLease + 100*time.Millisecond) // the killed process's leases run out
			if _, err := inbox.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			after, err := db.WebhookInboxStats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.ByState[store.DeliveryDone] != total {
				t.Fatalf("after the restart: %v; want all %d done", after.ByState, total)
			}
			restarted.mu.Lock()
			defer restarted.mu.Unlock()
			for id, done := range doneAtKill {
				switch n := restarted.seen[id]; {
				case done && n != 0:
					t.Errorf("%s was done before the kill and ran again %d times", id, n)
				case !done && n != 1:
					t.Errorf("%s was not done at the kill and ran %d times after the restart, want once", id, n)
				}
			}
		})
	}
}
