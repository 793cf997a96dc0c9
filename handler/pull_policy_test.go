package handler

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
)

// policyFiles is one Kustomize app, shop, that breaks each rule of the .kukie.yml
// beside it; the lines are noted in TestPullPolicyCheckAnnotatesEachRule.
var policyFiles = map[string]string{
	".kukie.yml": `version: 1
rules:
  image_digest: {level: error}
  image_registries: {level: warning, allowed: [ghcr.io/acme]}
  namespaces: {level: error, allowed: [shop]}
  secret_values: {level: error}
  denied_kinds:
    level: error
    kinds: [{kind: ClusterRoleBinding, role_ref: cluster-admin}]
  dry_run: {level: error}
`,
	"apps/shop/kustomization.yaml": "resources:\n- web.yaml\n- admin.yaml\nsecretGenerator:\n- name: api-key\n  literals: [key=abc123topsecret]\n",
	"apps/shop/web.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: payments\nspec:\n  template:\n    spec:\n" +
		"      containers:\n      - name: web\n        image: nginx:1.0\n",
	"apps/shop/admin.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: ops-admin\nroleRef:\n" +
		"  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects: []\n",
	"docs/README.md": "how we deploy\n",
}

// bumpWeb is a pull request's change of shop's image tag.
var bumpWeb = map[string]string{"apps/shop/web.yaml": strings.Replace(policyFiles["apps/shop/web.yaml"], "nginx:1.0", "nginx:1.1", 1)}

func withFiles(base map[string]string, over map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// policyRun is the one kukie/policy run on sha.
func (e *checkEnv) policyRun(t testing.TB, sha string) *gh.CheckRun {
	t.Helper()
	return e.runNamed(t, sha, github.PolicyCheckRunName)
}

// marks lists annotations as "level path:line".
func marks(anns []*gh.CheckRunAnnotation) []string {
	var out []string
	for _, a := range anns {
		out = append(out, fmt.Sprintf("%s %s:%d", a.GetAnnotationLevel(), a.GetPath(), a.GetStartLine()))
	}
	sort.Strings(out)
	return out
}

func (e *checkEnv) openPull(t *testing.T, change map[string]string) string {
	t.Helper()
	head := e.gh.PushCommit(t, checkRepo, "change", change, githubtest.DefaultAuthor)
	e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
	e.deliver(t, e.pullHandler(), "pull_request", "opened")
	return head
}

// TestPullPolicyCheckAnnotatesEachRule: a human pull request gets kukie/policy
// beside kukie/render, with each finding on the manifest line that causes it, under
// the rules of the default branch even when the pull request rewrites them.
func TestPullPolicyCheckAnnotatesEachRule(t *testing.T) {
	e := newCheckEnvOf(t, policyFiles, []string{"shop"})
	head := e.openPull(t, withFiles(bumpWeb, map[string]string{".kukie.yml": "rules: {}\n"}))

	if run := e.run(t, head); run.GetConclusion() != github.ConclusionSuccess {
		t.Fatalf("kukie/render %s, want success", run.GetConclusion())
	}
	run := e.policyRun(t, head)
	sum := run.GetOutput().GetSummary()
	if run.GetStatus() != "completed" || run.GetConclusion() != github.ConclusionFailure || run.GetExternalID() != "pull/1" {
		t.Fatalf("kukie/policy %s/%s %q, want completed/failure:\n%s", run.GetStatus(), run.GetConclusion(), run.GetExternalID(), sum)
	}
	anns := e.annotations(t, run.GetID())
	want := []string{
		"failure apps/shop/admin.yaml:8",         // denied_kinds: roleRef.name
		"failure apps/shop/kustomization.yaml:6", // secret_values: the generator's literals
		"failure apps/shop/web.yaml:11",          // image_digest: the image
		"failure apps/shop/web.yaml:5",           // namespaces: metadata.namespace
		"warning apps/shop/web.yaml:11",          // image_registries: the image
	}
	if got := marks(anns); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("annotations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, want := range []string{"| image_digest | error | 1 |", "| secret_values | error | 1 |", "| dry_run | error | 0 |",
		"Server-side dry-run: not run", "checked on the render of the 1 Applications"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	for _, a := range anns {
		if strings.Contains(a.GetMessage(), "abc123topsecret") || !strings.HasPrefix(a.GetTitle(), "Policy: ") {
			t.Errorf("annotation %s: %q", a.GetTitle(), a.GetMessage())
		}
	}
	if strings.Contains(sum, "abc123topsecret") {
		t.Errorf("summary shows a Secret value:\n%s", sum)
	}
}

func TestPullPolicyCheckOutcomes(t *testing.T) {
	cases := map[string]struct {
		config     string // .kukie.yml on main; "" for none
		change     map[string]string
		conclusion string
		title      string
		marks      []string
		message    string
	}{
		"no .kukie.yml": {change: bumpWeb, conclusion: github.ConclusionNeutral, title: "No policy configured"},
		"every rule off by default": {config: "version: 1\nrules:\n  image_digest: {}\n  namespaces:\n    allowed: [shop]\n",
			change: bumpWeb, conclusion: github.ConclusionNeutral, title: "No policy configured"},
		"an invalid .kukie.yml fails at its line": {config: "version: 1\nrules:\n  image_digest: {level: error}\n  image_tag: {level: error}\n",
			change: bumpWeb, conclusion: github.ConclusionFailure, title: ".kukie.yml is not valid",
			marks: []string{"failure .kukie.yml:4"}, message: `unknown key "image_tag"`},
		"a misspelt level fails at its line": {config: "rules:\n  secret_values:\n    level: eror\n",
			change: bumpWeb, conclusion: github.ConclusionFailure, title: ".kukie.yml is not valid",
			marks: []string{"failure .kukie.yml:3"}, message: `level "eror"`},
		"warnings do not fail": {config: "rules:\n  image_digest: {level: warning}\n",
			change: bumpWeb, conclusion: github.ConclusionSuccess, title: "0 errors, 1 warnings", marks: []string{"warning apps/shop/web.yaml:11"}},
		"a head that meets the policy": {config: "rules:\n  image_registries: {level: error, allowed: [docker.io]}\n",
			change: bumpWeb, conclusion: github.ConclusionSuccess, title: "1 Applications meet the policy"},
		"a change no app reads": {config: "rules:\n  image_digest: {level: error}\n",
			change: map[string]string{"docs/README.md": "how we really deploy\n"}, conclusion: github.ConclusionNeutral, title: "No Application reads the changed files"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newCheckEnvOf(t, withFiles(policyFiles, map[string]string{".kukie.yml": tc.config}), []string{"shop"})
			head := e.openPull(t, tc.change)
			run := e.policyRun(t, head)
			if run.GetConclusion() != tc.conclusion || !strings.Contains(run.GetOutput().GetTitle(), tc.title) {
				t.Fatalf("%s %q, want %s %q:\n%s", run.GetConclusion(), run.GetOutput().GetTitle(), tc.conclusion, tc.title, run.GetOutput().GetSummary())
			}
			anns := e.annotations(t, run.GetID())
			if got := marks(anns); strings.Join(got, "\n") != strings.Join(tc.marks, "\n") {
				t.Fatalf("annotations %v, want %v", got, tc.marks)
			}
			if tc.message != "" && !strings.Contains(anns[0].GetMessage(), tc.message) {
				t.Fatalf("annotation message %q, want %q", anns[0].GetMessage(), tc.message)
			}
			if r := e.run(t, head); r.GetConclusion() == github.ConclusionFailure {
				t.Errorf("kukie/render %s: the policy must not change it", r.GetConclusion())
			}
		})
	}
}

// TestPullPolicyCheckBatchesAnnotations: more findings than GitHub takes in one
// request all reach the run (the fake GitHub refuses more than 50 at once).
func TestPullPolicyCheckBatchesAnnotations(t *testing.T) {
	var pods strings.Builder
	for i := range 60 {
		fmt.Fprintf(&pods, "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p%d\nspec:\n  containers:\n  - name: c\n    image: busybox:1.%d\n", i, i)
	}
	files := withFiles(policyFiles, map[string]string{
		".kukie.yml":                   "rules:\n  image_digest: {level: error}\n",
		"apps/shop/kustomization.yaml": "resources:\n- pods.yaml\n",
		"apps/shop/pods.yaml":          pods.String(),
	})
	e := newCheckEnvOf(t, files, []string{"shop"})
	head := e.openPull(t, map[string]string{"apps/shop/pods.yaml": pods.String() + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: more\n"})
	run := e.policyRun(t, head)
	anns := e.annotations(t, run.GetID())
	if run.GetConclusion() != github.ConclusionFailure || len(anns) != 60 || anns[0].GetStartLine() != 9 {
		t.Fatalf("%s with %d annotations (first at %d), want failure with 60 from line 9", run.GetConclusion(), len(anns), anns[0].GetStartLine())
	}
}

func TestPullPolicyCheckEvents(t *testing.T) {
	t.Run("merge_group checks_requested", func(t *testing.T) {
		e := newCheckEnvOf(t, policyFiles, []string{"shop"})
		e.gh.PushCommit(t, checkRepo, "change", bumpWeb, githubtest.DefaultAuthor)
		n := e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
		head, _ := e.gh.QueueMergeGroup(t, checkRepo, n)
		e.deliver(t, &MergeGroup{Base: e.base, Checks: e.checker}, "merge_group", "checks_requested")
		run := e.policyRun(t, head)
		if run.GetConclusion() != github.ConclusionFailure || !strings.HasPrefix(run.GetExternalID(), "merge_group/") {
			t.Fatalf("group policy run %s %q", run.GetConclusion(), run.GetExternalID())
		}
	})
	t.Run("re-run of kukie/policy", func(t *testing.T) {
		e := newCheckEnvOf(t, policyFiles, []string{"shop"})
		head := e.openPull(t, bumpWeb)
		first := e.policyRun(t, head)
		e.gh.ResetRequestCounts()
		e.gh.RerequestCheckRun(t, checkRepo, first.GetID())
		e.deliver(t, &CheckRun{Base: e.base, Pipeline: &trackingPipeline{}, Checks: e.checker}, "check_run", "rerequested")
		if n := e.gh.RequestCount("GET /repos/{owner}/{repo}/compare/{basehead...}"); n != 1 {
			t.Fatalf("%d comparisons after the re-run, want 1", n)
		}
		if run := e.policyRun(t, head); run.GetID() != first.GetID() || run.GetConclusion() != github.ConclusionFailure {
			t.Fatalf("run %d %s, want run %d failure", run.GetID(), run.GetConclusion(), first.GetID())
		}
		if anns := e.annotations(t, first.GetID()); len(anns) != 5 {
			t.Fatalf("%d annotations after the re-run, want the 5 once", len(anns))
		}
	})
}
