package plan_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// renamingRenderer reports that its edit renames the target, as render does for
// a ConfigMap a configMapGenerator names by a hash of its content.
type renamingRenderer struct {
	*lineRenderer
	renamed string
}

func (r renamingRenderer) Plan(ctx context.Context, at cache.Commit, req render.Request) (*render.Result, error) {
	res, err := r.lineRenderer.Plan(ctx, at, req)
	if res != nil {
		res.Renamed = r.renamed
		res.Renames = []render.Rename{{App: req.App, APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", From: "web-settings-k89gbb87k7", To: "web-settings-c4kffct259", Generator: `configMapGenerator "web-settings" of apps/web/kustomization.yaml`}}
		res.ClusterDiff = append(res.ClusterDiff,
			render.ObjectDiff{App: req.App, APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "web-settings-c4kffct259", Action: "added"},
			render.ObjectDiff{App: req.App, APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "web-settings-k89gbb87k7", Action: "removed"})
	}
	return res, err
}

// renamedCluster has the target under its new name only: the sync pruned the
// object of the old name. It records the names the pipeline reads and watches.
type renamedCluster struct {
	*fakeCluster
	live string
	mu   *sync.Mutex
	read *[]string
}

func (c renamedCluster) seen(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.read = append(*c.read, name)
}

func (c renamedCluster) Object(ctx context.Context, ref clusteraccess.Ref, t objref.Target) (map[string]any, error) {
	c.seen(t.Name)
	if t.Name != c.live {
		return nil, clusteraccess.ErrObjectNotFound
	}
	return c.fakeCluster.Object(ctx, ref, t)
}

func (c renamedCluster) FollowObject(_ context.Context, _ clusteraccess.Ref, t objref.Target) (clusteraccess.Followed, error) {
	c.seen("watch " + t.Name)
	return followed{make(chan struct{}), &atomic.Pointer[error]{}}, nil
}

// TestPipelineFollowsTheRenamedTarget: an edit that renames its target (render's
// Result.Renamed) is recorded in the payload, and the deployment is followed,
// watched and judged under the new name: the object of the old name is gone
// once Argo CD synced, and reading it kept the plan deploying until its timeout
// ("reading Deployment/web failed").
func TestPipelineFollowsTheRenamedTarget(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.engine = renamingRenderer{lineRenderer: e.render, renamed: "web-5f8c2t9bkm"}
		var read []string
		cluster := renamedCluster{fakeCluster: e.cluster, live: "web-5f8c2t9bkm", mu: &sync.Mutex{}, read: &read}
		ctx := context.Background()
		p := plan.New(plan.Deps{Store: e.db, Clusters: cluster, Renderer: e.engine, Repos: e.repos, Connections: e.conns}, plan.Config{
			ClaimTTL: testClaimTTL, DeployPoll: 20 * time.Millisecond, DeployTimeout: time.Hour, PublicURL: "https://kukie.example", BotLogin: e.gh.BotLogin(), TransientBackoff: 10 * time.Millisecond,
		})
		t.Cleanup(p.Close)
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		pl := e.submitOpen(ctx, p, scale(4, "renamed"))
		if pay, err := plan.PayloadOf(pl); err != nil || pay.Renamed != "web-5f8c2t9bkm" {
			t.Fatalf("payload renamed %q (%v), want web-5f8c2t9bkm", pay.Renamed, err)
		} else if len(pay.Renames) != 1 || pay.Renames[0].To != "web-settings-c4kffct259" {
			t.Fatalf("payload renames %+v, want the generated ConfigMap's", pay.Renames)
		}
		// The pull request's cluster diff says which added and removed objects
		// are one renamed ConfigMap.
		var body string
		for _, pr := range e.gh.PullRequests(t, repoName) {
			if pr.GetNumber() == int(pl.PRNumber) {
				body = pr.GetBody()
			}
		}
		for _, want := range []string{"**ConfigMap shop/web-settings-c4kffct259** (added, renamed from web-settings-k89gbb87k7,", "**ConfigMap shop/web-settings-k89gbb87k7** (removed, renamed to web-settings-c4kffct259,"} {
			if !strings.Contains(body, want) {
				t.Errorf("pull request body lacks %q:\n%s", want, body)
			}
		}
		mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		e.pullMerged(ctx, p, pl, mergeSHA)
		done := e.waitFor(pl.Code, "deployed, failed, or a read of the target failed", func(cur store.Plan) bool {
			if cur.Status == string(plan.StatusDeployed) || cur.Status == string(plan.StatusDeployFailed) {
				return true
			}
			pay, err := plan.PayloadOf(cur)
			return err == nil && pay.Deployment != nil && strings.HasPrefix(pay.Deployment.Message, "reading ")
		})
		pay, _ := plan.PayloadOf(done)
		if done.Status != string(plan.StatusDeployed) {
			t.Fatalf("plan is %s (deployment %+v), want deployed", done.Status, pay.Deployment)
		}
		cluster.mu.Lock()
		defer cluster.mu.Unlock()
		if !slices.Contains(read, "watch web-5f8c2t9bkm") || slices.Contains(read, "web") || slices.Contains(read, "watch web") {
			t.Fatalf("the pipeline read and watched %v, want the new name web-5f8c2t9bkm only", read)
		}
	})
}
