package e2e_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
	kukie "github.com/kukie/kukie-gitops/service"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// renderRuns are the kukie/render runs on sha.
func (s *service) renderRuns(sha string) []*gh.CheckRun {
	s.t.Helper()
	var out []*gh.CheckRun
	for _, r := range s.gh.CheckRuns(s.t, s.repo, sha) {
		if r.GetName() == github.CheckRunName {
			out = append(out, r)
		}
	}
	return out
}

// completedRun waits until sha's kukie/render run is completed and returns it.
func (s *service) completedRun(sha string) *gh.CheckRun {
	s.t.Helper()
	return s.completedRunNamed(sha, github.CheckRunName)
}

// completedRunNamed waits until sha's run called name is completed and returns it.
func (s *service) completedRunNamed(sha, name string) *gh.CheckRun {
	s.t.Helper()
	deadline := time.Now().Add(eventually)
	for {
		for _, r := range s.runsNamed(sha, name) {
			if r.GetStatus() == "completed" {
				return r
			}
		}
		if time.Now().After(deadline) {
			logs := s.logs.String()
			s.t.Fatalf("no completed %s run on %s: %v\nlast log lines:\n%s", name, sha, s.runsNamed(sha, name), logs[max(0, len(logs)-4000):])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startReplica runs a second service process on the same database and
// configuration (its own caches), as a second replica would: its inbox workers take
// the stored deliveries beside the first's.
func (s *service) startReplica() {
	s.t.Helper()
	cfg := s.cfg
	cfg.Pipeline.CacheDir = s.t.TempDir()
	ctx, stop := context.WithCancel(s.logger.WithContext(context.Background()))
	svc, err := kukie.New(ctx, cfg, s.db, s.logger)
	if err != nil {
		stop()
		s.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	s.t.Cleanup(func() {
		once.Do(func() {
			stop()
			if err := <-done; err != nil {
				s.t.Errorf("replica stopped with an error: %v", err)
			}
		})
	})
}

func (s *service) pullHead(number int) string {
	s.t.Helper()
	for _, pr := range s.gh.PullRequests(s.t, s.repo) {
		if pr.GetNumber() == number {
			return pr.GetHead().GetSHA()
		}
	}
	s.t.Fatalf("no pull request #%d", number)
	return ""
}

func (s *service) webDeployment(edit func(string) string) map[string]string {
	return map[string]string{"apps/web/deployment.yaml": edit(repoFiles(s.t)["apps/web/deployment.yaml"])}
}

func replicas(n string) func(string) string {
	return func(s string) string { return strings.Replace(s, "replicas: 2", "replicas: "+n, 1) }
}

// The check of pull requests people open, as GitHub delivers them: the fake's
// signed pull_request deliveries reach the service's webhook route, the inbox
// stores them and its worker runs the check, which publishes kukie/render on the
// head, with the check's page as its details link. A fork's pull request is checked
// the same way.
func TestHumanAndForkPullRequestsAreChecked(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")

		head := s.gh.PushCommit(t, s.repo, "more-web", s.webDeployment(replicas("3")), githubtest.DefaultAuthor)
		number := s.gh.OpenPullRequest(t, s.repo, "more-web", "main", "More web replicas", githubtest.DefaultAuthor)
		run := s.completedRun(head)
		if run.GetConclusion() != github.ConclusionSuccess || !strings.Contains(run.GetOutput().GetText(), "+  replicas: 3") ||
			!strings.Contains(run.GetOutput().GetSummary(), "/web (cluster prod) | prod | self_heal | 0 | 1 | 0 |") {
			t.Fatalf("run %s: %s\n%s", run.GetConclusion(), run.GetOutput().GetSummary(), run.GetOutput().GetText())
		}
		for _, d := range s.gh.DeliveriesOf("pull_request", "opened") {
			if d.StatusCode != http.StatusAccepted {
				t.Errorf("the webhook route answered the delivery %d, want 202", d.StatusCode)
			}
		}
		id, ok := strings.CutPrefix(run.GetDetailsURL(), s.cfg.Server.PublicURL+prcheck.CheckPagePath)
		if !ok {
			t.Fatalf("details link %q is not a check's page", run.GetDetailsURL())
		}
		rec, err := db.PullCheckByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != store.PullCheckCompleted || rec.CheckRunID != run.GetID() || rec.HeadSHA != head || rec.Key != "pull/"+strconv.Itoa(number) ||
			!strings.Contains(string(rec.Result), "replicas: 3") {
			t.Errorf("stored check %+v", rec)
		}

		fork := s.gh.OpenForkPullRequest(t, s.repo, "outsider", "tune", "main", "Tune web from a fork",
			s.webDeployment(func(y string) string { return strings.Replace(y, "nginx:1.27.0", "nginx:1.27.1", 1) }))
		forkRun := s.completedRun(s.pullHead(fork))
		if forkRun.GetConclusion() != github.ConclusionSuccess || !strings.Contains(forkRun.GetOutput().GetText(), "image: nginx:1.27.1") {
			t.Fatalf("fork's run %s: %s\n%s", forkRun.GetConclusion(), forkRun.GetOutput().GetSummary(), forkRun.GetOutput().GetText())
		}
		if secrets := s.secretsSeen(run.GetOutput().GetText() + forkRun.GetOutput().GetText() + string(rec.Result)); len(secrets) > 0 {
			t.Errorf("the checks show %v", secrets)
		}
	})
}

// The stale-push race across two replicas on one database: the first head's check
// is held at GitHub's comparison while the second push arrives and is checked. The
// first head's result is never published: its run ends cancelled, naming the newer
// head, and the new head carries one run, its own result. With SQLite each replica
// has one inbox worker, so the second push is necessarily checked by the replica
// not holding the first (superseding through the database); with PostgreSQL either
// replica may take it.
func TestStalePushIsNeverPublishedOnTheNewHead(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.startReplica()
		s.deployWeb("main")

		old := s.gh.PushCommit(t, s.repo, "race", s.webDeployment(replicas("3")), githubtest.DefaultAuthor)
		release := make(chan struct{})
		compare := "/repos/acme/deploy/compare/*..." + old
		s.gh.InjectFault(githubtest.Fault{Method: http.MethodGet, Path: compare, Hold: release, Times: 1})
		number := s.gh.OpenPullRequest(t, s.repo, "race", "main", "Race", githubtest.DefaultAuthor)
		deadline := time.Now().Add(eventually)
		for s.gh.FaultHits(http.MethodGet, compare) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the first head's check never compared the change")
			}
			time.Sleep(20 * time.Millisecond)
		}

		newer := s.gh.PushCommit(t, s.repo, "race", s.webDeployment(replicas("4")), githubtest.DefaultAuthor)
		newRun := s.completedRun(newer)
		close(release)
		oldRun := s.completedRun(old)

		if oldRun.GetConclusion() != github.ConclusionCancelled || !strings.Contains(oldRun.GetOutput().GetSummary(), newer[:7]) {
			t.Errorf("old head's run %s: %s, want cancelled naming %s", oldRun.GetConclusion(), oldRun.GetOutput().GetSummary(), newer[:7])
		}
		if runs := s.renderRuns(newer); len(runs) != 1 || newRun.GetConclusion() != github.ConclusionSuccess ||
			!strings.Contains(newRun.GetOutput().GetText(), "+  replicas: 4") || strings.Contains(newRun.GetOutput().GetText(), "replicas: 3") {
			t.Fatalf("new head's runs %d, %s:\n%s", len(runs), newRun.GetConclusion(), newRun.GetOutput().GetText())
		}
		s.gh.WaitForDeliveries()
		history, err := db.PullChecksOf(context.Background(), s.repo, "pull/"+strconv.Itoa(number))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range history {
			if c.HeadSHA == old && c.State != store.PullCheckSuperseded || c.HeadSHA == newer && c.State == store.PullCheckSuperseded {
				t.Errorf("check of %s ended %s", c.HeadSHA[:7], c.State)
			}
		}
		if runs := s.renderRuns(old); len(runs) != 1 {
			t.Errorf("%d runs on the old head, want its one cancelled run", len(runs))
		}
	})
}
