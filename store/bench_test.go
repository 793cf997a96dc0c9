package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// BenchmarkTeamForAPIToken measures the lookup every authenticated API request makes.
func BenchmarkTeamForAPIToken(b *testing.B) {
	for name, open := range map[string]func(testing.TB) *store.DB{"sqlite": storetest.SQLite, "postgres": storetest.Postgres} {
		b.Run(name, func(b *testing.B) {
			db := open(b)
			ctx := context.Background()
			team, err := db.CreateTeam(ctx, "payments")
			if err != nil {
				b.Fatal(err)
			}
			// Other teams' tokens make the index lookup realistic.
			for range 200 {
				if _, _, err := db.CreateAPIToken(ctx, team.ID, "filler"); err != nil {
					b.Fatal(err)
				}
			}
			_, token, err := db.CreateAPIToken(ctx, team.ID, "bench")
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := db.TeamForAPIToken(ctx, token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConcurrentWriters measures writers competing for the database the way the
// webhook inbox does: many goroutines each storing a delivery (one INSERT) or revoking
// a token (a read-then-write transaction). Besides ns/op it reports the p50 and p99
// latency of one write, which is what a webhook sender waits for, and the slowest
// write: a writer starved by the others is where SQLITE_BUSY would come from.
func BenchmarkConcurrentWriters(b *testing.B) {
	for name, open := range map[string]func(testing.TB) *store.DB{"sqlite": storetest.SQLite, "postgres": storetest.Postgres} {
		b.Run(name, func(b *testing.B) {
			db := open(b)
			ctx := context.Background()
			team, err := db.CreateTeam(ctx, "payments")
			if err != nil {
				b.Fatal(err)
			}
			payload := []byte(`{"ref":"refs/heads/main","padding":"` + strings.Repeat("x", 1500) + `"}`)
			var (
				mu        sync.Mutex
				latencies = make([]time.Duration, 0, b.N)
				seq       atomic.Int64
			)
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					start := time.Now()
					var err error
					if n%4 == 0 {
						var tok store.APIToken
						if tok, _, err = db.CreateAPIToken(ctx, team.ID, "bench"); err == nil {
							_, err = db.RevokeAPIToken(ctx, tok.ID)
						}
					} else {
						err = db.InsertWebhookDelivery(ctx, store.WebhookDelivery{
							DeliveryID: fmt.Sprintf("bench-%d", n), Event: "push", Payload: payload,
						})
					}
					took := time.Since(start)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					latencies = append(latencies, took)
					mu.Unlock()
				}
			})
			b.StopTimer()
			if len(latencies) == 0 {
				return
			}
			slices.Sort(latencies)
			b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds())/1000, "max-ms")
		})
	}
}
