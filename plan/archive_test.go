package plan_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestArchiveOverItsLimitsRefusesThePlan: a repository whose archive unpacks to
// more than the cache's limits is the repository's doing, which another try
// downloads again: the plan is refused with the limit, not failed.
func TestArchiveOverItsLimitsRefusesThePlan(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
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

// TestFailureNamesNoHostPath: a plan failing in the archive cache (its folder for
// the repository cannot be made) is shown to its team and, for a public repository,
// to anyone reading its page: neither its reason, its history nor the API's view of
// it names the cache's folder on this host.
func TestFailureNamesNoHostPath(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		dir := t.TempDir()
		archives, err := cache.NewArchives(dir, 64<<20, cache.ArchiveLimits{MaxFileBytes: 1 << 20, MaxTotalBytes: 16 << 20, MaxFiles: 1000})
		if err != nil {
			t.Fatal(err)
		}
		// A file where the repository's folder goes: making the folder fails.
		if err := os.WriteFile(filepath.Join(dir, "archives", "acme~deploy"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		e.repos.Archives = archives
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "no-cache-folder"))
		if err != nil {
			t.Fatal(err)
		}
		pl = e.waitFor(pl.Code, "failed", func(p store.Plan) bool {
			return p.Status == string(plan.StatusFailed) || p.Status == string(plan.StatusRefused)
		})
		if pl.Status != string(plan.StatusFailed) || !strings.Contains(pl.StatusReason, "not a directory") {
			ls, _ := os.ReadDir(dir)
			t.Fatalf("%s with %s: %s; want failed with the cache's error %v", pl.Status, pl.ErrorCode, pl.StatusReason, ls)
		}
		events, err := db.PlanEvents(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		answer, err := json.Marshal(changes.View(pl))
		if err != nil {
			t.Fatal(err)
		}
		shown := []string{pl.StatusReason, string(pl.Payload), string(answer)}
		for _, ev := range events {
			shown = append(shown, ev.Message)
		}
		for _, s := range shown {
			if strings.Contains(s, dir) {
				t.Errorf("the cache folder %s is shown: %s", dir, s)
			}
		}
	})
}
