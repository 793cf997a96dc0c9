package plan_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

var (
	_ plan.ApplicationFollower = clusteraccess.Clusters{}
	_ plan.ObjectFollower      = clusteraccess.Clusters{}
)

// followedCluster is the fake cluster whose Application and target changes are
// reported on appChanges and targetChanges, or whose watches fail with appErr and
// targetErr. It counts the Application reads that reach the API server.
type followedCluster struct {
	*fakeCluster
	appChanges, targetChanges chan struct{}
	appErr, targetErr         error
	appReads                  *atomic.Int64
	// refused, when set, is what the watches report (Err): the cluster refuses
	// their credentials.
	refused *atomic.Pointer[error]
}

func newFollowedCluster(c *fakeCluster) followedCluster {
	return followedCluster{fakeCluster: c, appChanges: make(chan struct{}, 1), targetChanges: make(chan struct{}, 1), appReads: &atomic.Int64{},
		refused: &atomic.Pointer[error]{}}
}

// refuse has the watches report err (nil: they follow again) and wakes the plan.
func (c followedCluster) refuse(err error) {
	if err == nil {
		c.refused.Store(nil)
	} else {
		c.refused.Store(&err)
	}
	select {
	case c.targetChanges <- struct{}{}:
	default:
	}
}

func (c followedCluster) Application(ctx context.Context, ref clusteraccess.Ref, ns, name string) (argocd.Application, error) {
	c.appReads.Add(1)
	return c.fakeCluster.Application(ctx, ref, ns, name)
}

func (c followedCluster) FollowApplication(context.Context, clusteraccess.Ref, string, string) (clusteraccess.FollowedApplication, error) {
	if c.appErr != nil {
		return nil, c.appErr
	}
	return followedApp{followed: followed{c.appChanges, c.refused}, latest: c.application}, nil
}

func (c followedCluster) FollowObject(context.Context, clusteraccess.Ref, objref.Target) (clusteraccess.Followed, error) {
	if c.targetErr != nil {
		return nil, c.targetErr
	}
	return followed{c.targetChanges, c.refused}, nil
}

type followed struct {
	changes chan struct{}
	refused *atomic.Pointer[error]
}

func (f followed) Changes() <-chan struct{} { return f.changes }
func (f followed) Stop()                    {}

func (f followed) Err() error {
	if err := f.refused.Load(); err != nil {
		return *err
	}
	return nil
}

type followedApp struct {
	followed
	latest func() argocd.Application
}

func (f followedApp) Latest() (argocd.Application, bool) { return f.latest(), true }

// mergedAndDeploying opens a plan in a pipeline over cluster polling every poll,
// merges it and waits until it follows the deployment; it returns the plan and the
// merge commit.
func mergedAndDeploying(t *testing.T, e *env, cluster plan.Cluster, poll time.Duration) (store.Plan, string) {
	t.Helper()
	ctx := context.Background()
	p := plan.New(plan.Deps{Store: e.db, Clusters: cluster, Renderer: e.render, Repos: e.repos, Connections: e.conns},
		plan.Config{ClaimTTL: testClaimTTL, DeployPoll: poll, DeployTimeout: time.Hour, PublicURL: "https://kukie.example", BotLogin: e.gh.BotLogin()})
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
// Application's change is reported, not because a poll came; the Application is read
// as its watch saw it, never from the API server.
func TestDeployFollowedByWatch(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		c := newFollowedCluster(e.cluster)
		pl, mergeSHA := mergedAndDeploying(t, e, c, time.Hour)
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		c.appChanges <- struct{}{}
		e.waitStatus(pl.Code, plan.StatusDeployed)
		if n := c.appReads.Load(); n != 0 {
			t.Fatalf("the watched Application was read %d times from the API server, want 0", n)
		}
	})
}

// TestDeployFollowsTheTargetByWatch: with a poll of an hour, a synced change whose
// target is still rolling out is deployed once the target's watch reports the rollout
// ended, the Application unchanged meanwhile.
func TestDeployFollowsTheTargetByWatch(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		c := newFollowedCluster(e.cluster)
		pl, mergeSHA := mergedAndDeploying(t, e, c, time.Hour)
		e.cluster.setTargetStatus(rolloutStatus(2, 4, 1, 2))
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		c.appChanges <- struct{}{}
		e.waitFor(pl.Code, "rolling out", func(p store.Plan) bool {
			pay, err := plan.PayloadOf(p)
			return err == nil && pay.Deployment != nil && pay.Deployment.Message == "Deployment/web is rolling out: Updated: 1/4"
		})
		e.cluster.setTargetStatus(nil)
		c.targetChanges <- struct{}{}
		e.waitStatus(pl.Code, plan.StatusDeployed)
	})
}

// TestDeployPolledWhenTheWatchFails: a cluster whose Applications cannot be watched,
// or whose target cannot be, is polled; the plan's history says so, naming what is
// polled and why, and the plan is deployed all the same.
func TestDeployPolledWhenTheWatchFails(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		appErr, targetErr error
		want              []string
	}{
		"application": {appErr: errors.New("applications cannot be watched"),
			want: []string{"following Argo CD by polling every 20ms: the Application cannot be watched: applications cannot be watched"}},
		"target": {targetErr: errors.New("deployments cannot be watched"),
			want: []string{"checking the rollout of Deployment/web by polling every 20ms: it cannot be watched: deployments cannot be watched"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
				e := newEnv(t, db)
				c := newFollowedCluster(e.cluster)
				c.appErr, c.targetErr = tc.appErr, tc.targetErr
				pl, mergeSHA := mergedAndDeploying(t, e, c, 20*time.Millisecond)
				e.cluster.setTargetStatus(rolloutStatus(2, 4, 1, 2))
				e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
				if tc.appErr == nil {
					c.appChanges <- struct{}{}
				}
				e.waitFor(pl.Code, "rolling out", func(p store.Plan) bool {
					pay, err := plan.PayloadOf(p)
					return err == nil && pay.Deployment != nil && strings.Contains(pay.Deployment.Message, "rolling out")
				})
				e.cluster.setTargetStatus(nil)
				e.waitStatus(pl.Code, plan.StatusDeployed)
				events, err := db.PlanEvents(context.Background(), pl.Code)
				if err != nil {
					t.Fatal(err)
				}
				var notes []string
				for _, ev := range events {
					if strings.Contains(ev.Message, "by polling") {
						notes = append(notes, ev.Message)
					}
				}
				if strings.Join(notes, "\n") != strings.Join(tc.want, "\n") {
					t.Fatalf("history notes on polling: %q, want %q", notes, tc.want)
				}
			})
		})
	}
}

// TestDeployPolledWhileCredentialsAreRefused: with a poll of 20ms, the watches of a
// deploying plan report that the cluster refuses their credentials; the plan is
// woken, its history says so and that it polls, and polling deploys it. Once the
// credentials are accepted again the history says the plan is watched again.
func TestDeployPolledWhileCredentialsAreRefused(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		c := newFollowedCluster(e.cluster)
		pl, mergeSHA := mergedAndDeploying(t, e, c, 20*time.Millisecond)
		const rejected = "cluster credentials were rejected: watch applications: Unauthorized; following the deployment by polling every 20ms until the cluster accepts them again"
		c.refuse(errors.New("watch applications: Unauthorized"))
		e.waitFor(pl.Code, "the refusal in its history", func(p store.Plan) bool { return hasEvent(t, db, p.Code, rejected) })
		// No watch reports the sync: the poll finds it.
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		e.waitStatus(pl.Code, plan.StatusDeployed)
	})
}

// TestDeployWatchedAgainOnceCredentialsAreAccepted: a refusal of the watches'
// credentials that ends (a new kubeconfig) is noted in the plan's history both
// ways, and with a poll of an hour only the watches deploy the plan.
func TestDeployWatchedAgainOnceCredentialsAreAccepted(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		c := newFollowedCluster(e.cluster)
		pl, mergeSHA := mergedAndDeploying(t, e, c, time.Hour)
		c.refuse(errors.New("watch deployments shop/web: Unauthorized"))
		e.waitFor(pl.Code, "the refusal in its history", func(p store.Plan) bool {
			return hasEvent(t, db, p.Code, "cluster credentials were rejected: watch deployments shop/web: Unauthorized; following the deployment by polling every 1h0m0s until the cluster accepts them again")
		})
		c.refuse(nil)
		e.waitFor(pl.Code, "watched again", func(p store.Plan) bool {
			return hasEvent(t, db, p.Code, "cluster credentials are accepted again; following the deployment by watch")
		})
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		c.appChanges <- struct{}{}
		e.waitStatus(pl.Code, plan.StatusDeployed)
	})
}

// hasEvent reports whether the plan's history has an event saying msg.
func hasEvent(t *testing.T, db *store.DB, code, msg string) bool {
	t.Helper()
	events, err := db.PlanEvents(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Message == msg {
			return true
		}
	}
	return false
}
