package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestArchiveOverItsLimitsRefusesThePlan: a repository whose archive unpacks to
// more than the cache's limits is the repository's doing, which another try
// downloads again: the plan is refused with the limit, not failed.
func TestArchiveOverItsLimitsRefusesThePlan(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		archives, err := cache.NewArchives(t.TempDir(), 64<<20, cache.ArchiveLimits{MaxFileBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxFiles: 2})
		if err != nil {
			t.Fatal(err)
		}
		e.repos.Archives = archives
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(3, "big-repo"))
		if err != nil {
			t.Fatal(err)
		}
		pl = e.waitFor(pl.Code, "refused", func(p store.Plan) bool { return p.Status == string(plan.StatusRefused) })
		if pl.ErrorCode != plan.CodeRefused || !strings.Contains(pl.StatusReason, "repository archive over the limit: more than 2 entries") {
			t.Fatalf("refused with %s: %s", pl.ErrorCode, pl.StatusReason)
		}
	})
}
