package store_test

import (
	"context"
	"testing"

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
