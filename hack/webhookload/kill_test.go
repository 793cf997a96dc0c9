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

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// The child process of TestNoAcknowledgedDeliveryIsLostOnKill serves the webhook
// route over the database named by childDBEnv until it is killed.
const (
	childDBEnv     = "WEBHOOKLOAD_CHILD_DB"
	childSecretEnv = "WEBHOOKLOAD_CHILD_SECRET"
)

func TestMain(m *testing.M) {
	if dbURL := os.Getenv(childDBEnv); dbURL != "" {
		os.Exit(serveChild(dbURL, os.Getenv(childSecretEnv)))
	}
	os.Exit(m.Run())
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
func startChild(t *testing.T, dbURL, hookSecret string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDBEnv+"="+dbURL, childSecretEnv+"="+hookSecret)
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
