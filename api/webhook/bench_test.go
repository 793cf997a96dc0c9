package webhook_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// BenchmarkWebhookAccept measures verify + store + 202 for signed deliveries sent
// by 16 concurrent clients over loopback, on each database. It reports the ack
// latency percentiles besides ns/op (the inverse of accepted deliveries per second).
func BenchmarkWebhookAccept(b *testing.B) {
	for _, dialect := range []store.Dialect{store.SQLite, store.Postgres} {
		b.Run(string(dialect), func(b *testing.B) {
			db := storetest.OpenURL(b, storetest.EmptyURL(b, dialect))
			if _, err := db.Migrate(b.Context()); err != nil {
				b.Fatal(err)
			}
			srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.New(io.Discard), Auth: db})
			if err != nil {
				b.Fatal(err)
			}
			(&webhook.Receiver{Store: db, Secret: hookSecret}).Mount(srv)
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

			pad := make([]byte, 1500)
			_, _ = rand.Read(pad)
			body := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","installation":{"id":1},"padding":%q}`, hex.EncodeToString(pad)))
			sig := sign(hookSecret, body)
			var mu sync.Mutex
			latencies := make([]time.Duration, 0, b.N)
			var failed atomic.Int64
			b.SetParallelism(8) // 8 × GOMAXPROCS senders
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("POST", ts.URL+webhook.Path, bytes.NewReader(body))
					req.Header.Set("X-GitHub-Event", "push")
					req.Header.Set("X-GitHub-Delivery", uuid.NewString())
					req.Header.Set("X-Hub-Signature-256", sig)
					start := time.Now()
					res, err := client.Do(req)
					if err != nil {
						failed.Add(1)
						continue
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					took := time.Since(start)
					if res.StatusCode != http.StatusAccepted {
						failed.Add(1)
						continue
					}
					mu.Lock()
					latencies = append(latencies, took)
					mu.Unlock()
				}
			})
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d deliveries were not accepted", n)
			}
			sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
			if len(latencies) > 0 {
				b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}
