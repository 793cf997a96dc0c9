package prcheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestPolicyRunLinksToItsFindingsOnTheCheckPage: the kukie/policy run's details
// link is the check's page at its findings, from the start and at the end, and
// the check's record keeps the findings with their manifest lines for the page.
func TestPolicyRunLinksToItsFindingsOnTheCheckPage(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r := newReplicas(t, db, time.Hour)
		ctx := context.Background()
		r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": "rules:\n  image_digest: {level: warning}\n  dry_run: {level: error}\n"}, githubtest.DefaultAuthor)
		head := r.gh.PushCommit(t, repo, "feature", image("1.1"), githubtest.DefaultAuthor)
		number := r.gh.OpenPullRequest(t, repo, "feature", "main", "Bump", githubtest.DefaultAuthor)
		if err := r.b.Check(ctx, r.head(t, number, head)); err != nil {
			t.Fatal(err)
		}
		history, err := db.PullChecksOf(ctx, repo, "pull/"+strconv.Itoa(number))
		if err != nil || len(history) != 1 {
			t.Fatalf("history %+v, %v", history, err)
		}
		want := prcheck.CheckURL("https://kukie.example", history[0].ID) + prcheck.PolicyAnchor
		var policyRuns int
		for _, run := range r.gh.CheckRuns(t, repo, head) {
			if run.GetName() != github.PolicyCheckRunName {
				continue
			}
			policyRuns++
			if run.GetDetailsURL() != want || run.GetConclusion() != github.ConclusionSuccess {
				t.Errorf("kukie/policy %s with details link %q, want success linking to %q", run.GetConclusion(), run.GetDetailsURL(), want)
			}
		}
		if policyRuns != 1 {
			t.Fatalf("%d kukie/policy runs", policyRuns)
		}
		_, res := storedCheck(t, db, history[0].ID)
		p := res.Policy
		if p == nil || p.Conclusion != github.ConclusionSuccess || !p.Configured || p.DefaultBranch != "main" || len(p.Findings) != 1 {
			t.Fatalf("stored policy %+v, want one finding", p)
		}
		f := p.Findings[0]
		if f.Rule != "image_digest" || f.Level != "warning" || f.Path != "apps/web/deployment.yaml" || f.Line != 11 || f.App != "argocd/web (cluster prod)" {
			t.Errorf("stored finding %+v, want image_digest at apps/web/deployment.yaml:11", f)
		}
		// No DryRun access is configured: the rule says so.
		if p.DryRun != "not run: the service has no cluster access to dry-run with" {
			t.Errorf("stored dry-run %q", p.DryRun)
		}
	})
}

// TestPolicyFindsAPlainSecretEnvValueOfAPullRequest: a pull request a person
// opens giving a container's DB_PASSWORD a plain value, in a repository whose
// policy turns secret_values on, fails kukie/policy with a finding at the
// variable's line, and neither run nor the stored check shows the value.
func TestPolicyFindsAPlainSecretEnvValueOfAPullRequest(t *testing.T) {
	const value = "plain-Qw83ks"
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r := newReplicas(t, db, time.Hour)
		ctx := context.Background()
		r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": "rules:\n  secret_values: {level: error}\n"}, githubtest.DefaultAuthor)
		withEnv := strings.Replace(files["apps/web/deployment.yaml"], "        image: nginx:1.0\n",
			"        image: nginx:1.0\n        env:\n        - name: DB_PASSWORD\n          value: "+value+"\n", 1)
		head := r.gh.PushCommit(t, repo, "feature", map[string]string{"apps/web/deployment.yaml": withEnv}, githubtest.DefaultAuthor)
		number := r.gh.OpenPullRequest(t, repo, "feature", "main", "Connect the database", githubtest.DefaultAuthor)
		if err := r.b.Check(ctx, r.head(t, number, head)); err != nil {
			t.Fatal(err)
		}
		var policyRuns int
		for _, run := range r.gh.CheckRuns(t, repo, head) {
			out, err := json.Marshal(run)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), value) {
				t.Errorf("%s shows the value: %s", run.GetName(), out)
			}
			if run.GetName() != github.PolicyCheckRunName {
				continue
			}
			policyRuns++
			if run.GetConclusion() != github.ConclusionFailure {
				t.Errorf("kukie/policy %s, want failure: %s", run.GetConclusion(), run.GetOutput().GetSummary())
			}
		}
		if policyRuns != 1 {
			t.Fatalf("%d kukie/policy runs", policyRuns)
		}
		history, err := db.PullChecksOf(ctx, repo, "pull/"+strconv.Itoa(number))
		if err != nil || len(history) != 1 {
			t.Fatalf("history %+v, %v", history, err)
		}
		rec, res := storedCheck(t, db, history[0].ID)
		if strings.Contains(string(rec.Result), value) {
			t.Errorf("the stored check shows the value: %s", rec.Result)
		}
		p := res.Policy
		if p == nil || len(p.Findings) != 1 {
			t.Fatalf("stored policy %+v, want one finding", p)
		}
		f := p.Findings[0]
		if f.Rule != "secret_values" || f.Level != "error" || f.Path != "apps/web/deployment.yaml" || f.Line != 14 ||
			!strings.Contains(f.Message, "env DB_PASSWORD looks like a secret") {
			t.Errorf("stored finding %+v, want secret_values at apps/web/deployment.yaml:14 naming DB_PASSWORD", f)
		}
	})
}

// acceptingDryRun accepts every object and counts them.
type acceptingDryRun struct{ sent atomic.Int32 }

func (a *acceptingDryRun) DryRunEach(_ context.Context, _ clusteraccess.Ref, objects []map[string]any) ([]clusteraccess.DryRunRejection, error) {
	a.sent.Add(int32(len(objects)))
	return nil, nil
}

// checkWithDryRun checks a pull request of change on a repository whose policy
// turns the dry-run rule on, dry-run through dry, and returns its kukie/policy
// run's summary.
func checkWithDryRun(t *testing.T, dry prcheck.DryRunner, change map[string]string) string {
	t.Helper()
	r := newReplicas(t, storetest.SQLite(t), time.Hour)
	r.b.DryRun = dry
	r.b.Applications.(applications).apps[0].Spec.Destination.Server = argocd.InClusterServer
	r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": "rules:\n  dry_run: {level: error}\n"}, githubtest.DefaultAuthor)
	head := r.gh.PushCommit(t, repo, "feature", change, githubtest.DefaultAuthor)
	number := r.gh.OpenPullRequest(t, repo, "feature", "main", "Change", githubtest.DefaultAuthor)
	if err := r.b.Check(context.Background(), r.head(t, number, head)); err != nil {
		t.Fatal(err)
	}
	var runs []*gh.CheckRun
	for _, run := range r.gh.CheckRuns(t, repo, head) {
		if run.GetName() == github.PolicyCheckRunName {
			runs = append(runs, run)
		}
	}
	if len(runs) != 1 {
		t.Fatalf("%d kukie/policy runs, want 1", len(runs))
	}
	if runs[0].GetConclusion() != github.ConclusionSuccess {
		t.Errorf("kukie/policy %s, want success", runs[0].GetConclusion())
	}
	return runs[0].GetOutput().GetSummary()
}

// TestDryRunSendsAtMostMaxDryRunObjects: a change of more objects than a check
// sends has the first MaxDryRunObjects dry-run and says how many were not.
func TestDryRunSendsAtMostMaxDryRunObjects(t *testing.T) {
	dry := &acceptingDryRun{}
	change := map[string]string{}
	resources := "resources:\n- deployment.yaml\n"
	for i := range prcheck.MaxDryRunObjects + 10 {
		name := fmt.Sprintf("cm-%02d.yaml", i)
		resources += "- " + name + "\n"
		change["apps/web/"+name] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%02d\n", i)
	}
	change["apps/web/kustomization.yaml"] = resources
	sum := checkWithDryRun(t, dry, change)
	if got := dry.sent.Load(); got != prcheck.MaxDryRunObjects {
		t.Errorf("%d objects sent, want %d", got, prcheck.MaxDryRunObjects)
	}
	want := fmt.Sprintf("Server-side dry-run: passed (`%d changed objects sent, 0 refused; 10 not sent: a check sends at most %d objects, within 30s`).",
		prcheck.MaxDryRunObjects, prcheck.MaxDryRunObjects)
	if !strings.Contains(sum, want) {
		t.Errorf("summary lacks %q:\n%s", want, sum)
	}
}

// unreachableDryRun is a cluster that cannot be asked.
type unreachableDryRun struct{}

func (unreachableDryRun) DryRunEach(context.Context, clusteraccess.Ref, []map[string]any) ([]clusteraccess.DryRunRejection, error) {
	return nil, fmt.Errorf("%w: dial tcp 10.0.0.1:6443: connection refused", clusteraccess.ErrClusterUnreachable)
}

// TestDryRunOfAnUnreachableClusterWarns: a cluster that cannot be asked says
// nothing of the change: a warning at most, with the cluster's words.
func TestDryRunOfAnUnreachableClusterWarns(t *testing.T) {
	sum := checkWithDryRun(t, unreachableDryRun{}, image("1.1"))
	for _, want := range []string{"| dry_run | error | 1 |", "Server-side dry-run: unreachable (`cluster prod could not be asked: cluster unreachable: dial tcp 10.0.0.1:6443: connection refused`).",
		"**dry_run** (warning)"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

// TestPlanPolicyRunLinksToTheChangePage: the kukie/policy run of the service's own
// pull request links to the change's page, as its kukie/render run does, with a
// policy and without one.
func TestPlanPolicyRunLinksToTheChangePage(t *testing.T) {
	for name, rules := range map[string]string{"a policy": "rules:\n  image_digest: {level: warning}\n", "no rule on": "rules: {}\n"} {
		t.Run(name, func(t *testing.T) {
			r := newReplicas(t, storetest.SQLite(t), time.Hour)
			r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": rules}, githubtest.DefaultAuthor)
			head := r.gh.PushCommit(t, repo, "kukie/abc123", image("1.1"), githubtest.DefaultAuthor)
			h := r.head(t, 1, head)
			err := r.b.CheckPolicy(context.Background(), plan.PolicyHead{InstallationID: h.InstallationID, Repo: h.Repo, RepoURL: h.RepoURL,
				BaseBranch: h.BaseBranch, BaseSHA: h.BaseSHA, HeadSHA: head, Key: "abc123"})
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, run := range r.gh.CheckRuns(t, repo, head) {
				if run.GetName() == github.PolicyCheckRunName {
					found++
					if run.GetDetailsURL() != "https://kukie.example/changes/abc123" {
						t.Errorf("details link %q, want the change's page", run.GetDetailsURL())
					}
				}
			}
			if found != 1 {
				t.Errorf("%d kukie/policy runs, want 1", found)
			}
		})
	}
}
