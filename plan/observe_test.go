package plan_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// recorder is an observer that keeps what it was told.
type recorder struct {
	mu          sync.Mutex
	transitions []string
	steps       []plan.Status
	refused     []string
	deployed    []time.Duration
	timeouts    int
	sweeps      []plan.PullSweep
}

func (r *recorder) Transition(from, to plan.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.transitions = append(r.transitions, fmt.Sprintf("%s>%s", from, to))
}

func (r *recorder) Step(state plan.Status, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d < 0 {
		panic("negative step duration")
	}
	r.steps = append(r.steps, state)
}

func (r *recorder) Refused(code string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused = append(r.refused, code)
}

func (r *recorder) Deployed(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deployed = append(r.deployed, d)
}

func (r *recorder) DeployTimedOut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timeouts++
}

func (r *recorder) PullSweep(s plan.PullSweep) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweeps = append(r.sweeps, s)
}

// observedPipeline starts a pipeline whose observer is the returned recorder.
func observedPipeline(t *testing.T, db *store.DB) (*env, *recorder, *plan.Pipeline) {
	t.Helper()
	e := newEnv(t, db)
	rec := &recorder{}
	e.observer = rec
	return e, rec, e.startedPipeline(context.Background(), plan.Hooks{})
}

func TestPipelineObserverSeesTransitionsStepsAndTheDeploy(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e, rec, p := observedPipeline(t, db)
		ctx := context.Background()
		pl := e.submitOpen(ctx, p, scale(4, "k1"))
		mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
		e.pullMerged(ctx, p, pl, mergeSHA)
		e.waitStatus(pl.Code, plan.StatusDeploying)
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		e.waitStatus(pl.Code, plan.StatusDeployed)
		p.Close()

		rec.mu.Lock()
		defer rec.mu.Unlock()
		want := ">deciding deciding>preparing preparing>committing committing>pr_open pr_open>merged merged>deploying deploying>deployed"
		if got := strings.Join(rec.transitions, " "); got != want {
			t.Errorf("transitions %s, want %s", got, want)
		}
		for _, s := range []plan.Status{plan.StatusPreparing, plan.StatusCommitting, plan.StatusMerged, plan.StatusDeploying} {
			if !slices.Contains(rec.steps, s) {
				t.Errorf("no step observed in %s; observed %v", s, rec.steps)
			}
		}
		if len(rec.deployed) != 1 {
			t.Fatalf("deploys observed %v, want one", rec.deployed)
		}
		if len(rec.refused) != 0 {
			t.Errorf("refusals %v, want none", rec.refused)
		}
		if rec.timeouts != 0 {
			t.Errorf("%d deploy timeouts observed for a plan deployed in time", rec.timeouts)
		}
	})
}

func TestPipelineObserverSeesRefusalsByCode(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e, rec, p := observedPipeline(t, db)
		ctx := context.Background()
		req := scale(2, "")
		req.Target.Name = "adhoc"
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", req)
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(pl.Code, plan.StatusRefused)
		p.Close()

		rec.mu.Lock()
		defer rec.mu.Unlock()
		if fmt.Sprint(rec.refused) != fmt.Sprint([]string{plan.CodeNotGitOpsManaged}) {
			t.Errorf("refusals %v, want [%s]", rec.refused, plan.CodeNotGitOpsManaged)
		}
		if got := strings.Join(rec.transitions, " "); got != ">deciding deciding>refused" {
			t.Errorf("transitions %s", got)
		}
	})
}

// renders is a render.Observer that counts successful renders by source type.
type renders struct {
	mu sync.Mutex
	ok map[render.SourceType]int
}

func (r *renders) Rendered(st render.SourceType, _ time.Duration, objects int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && objects > 0 {
		r.ok[st]++
	}
}

func TestRenderEngineObserverSeesThePlansRenders(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		rec := &renders{ok: map[render.SourceType]int{}}
		e.engine = cache.RenderEngine{Observer: rec}
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		e.submitOpen(ctx, p, scale(4, "k1"))
		p.Close()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.ok[render.SourceDirectory] == 0 {
			t.Fatalf("renders observed %v, want the Directory app's", rec.ok)
		}
	})
}
