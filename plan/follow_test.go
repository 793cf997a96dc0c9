package plan_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

var _ plan.ApplicationFollower = clusteraccess.Clusters{}

// followedCluster is the fake cluster whose Application changes are reported on
// changes, or whose watch fails with err.
type followedCluster struct {
	*fakeCluster
	changes chan struct{}
	err     error
}

func (c followedCluster) FollowApplication(context.Context, clusteraccess.Ref, string, string) (<-chan struct{}, func(), error) {
	if c.err != nil {
		return nil, nil, c.err
	}
	return c.changes, func() {}, nil
}

// mergedAndDeploying opens a plan in a pipeline over cluster polling every poll,
// merges it and waits until it follows the deployment; it returns the plan and the
// merge commit.
func mergedAndDeploying(t *testing.T, e *env, cluster plan.Cluster, poll time.Duration) (store.Plan, string) {
	t.Helper()
	ctx := context.Background()
	p := plan.New(plan.Deps{Store: e.db, Clusters: cluster, Renderer: e.render, Repos: e.repos, Connections: e.conns},
		plan.Config{ClaimTTL: time.Second, DeployPoll: poll, DeployTimeout: time.Hour, PublicURL: "https://kukie.example", BotLogin: e.gh.BotLogin()})
	t.Cleanup(p.Close)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pl := e.submitOpen(ctx, p, scale(4, "k1"))
	mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
	e.pullMerged(ctx, p, pl, mergeSHA)
	// Once the first check found the merge not synced, the plan waits for what comes
	// next: a change of the Application or the poll.
	pl = e.waitFor(pl.Code, "checked once", func(p store.Plan) bool {
		events, err := e.db.PlanEvents(ctx, p.Code)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if ev.Message == "Argo CD has not synced the merge commit yet" {
				return true
			}
		}
		return false
	})
	return pl, mergeSHA
}

// TestDeployFollowedByWatch: with a poll of an hour, the plan is deployed because the
// Application's change is reported, not because a poll came.
func TestDeployFollowedByWatch(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		c := followedCluster{fakeCluster: e.cluster, changes: make(chan struct{}, 1)}
		pl, mergeSHA := mergedAndDeploying(t, e, c, time.Hour)
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		c.changes <- struct{}{}
		e.waitStatus(pl.Code, plan.StatusDeployed)
	})
}

// TestDeployPolledWhenTheWatchFails: a cluster whose Applications cannot be watched
// is polled; the plan's history says so, and the plan is deployed all the same.
func TestDeployPolledWhenTheWatchFails(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		c := followedCluster{fakeCluster: e.cluster, err: errors.New("applications cannot be watched")}
		pl, mergeSHA := mergedAndDeploying(t, e, c, 20*time.Millisecond)
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		e.waitStatus(pl.Code, plan.StatusDeployed)
		events, err := db.PlanEvents(context.Background(), pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		var notes []string
		for _, ev := range events {
			if strings.HasPrefix(ev.Message, "following Argo CD by polling") {
				notes = append(notes, ev.Message)
			}
		}
		if len(notes) != 1 || !strings.Contains(notes[0], "applications cannot be watched") {
			t.Fatalf("history notes on polling: %q, want one naming why", notes)
		}
	})
}
