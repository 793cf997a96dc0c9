package handler

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// dryRunFiles is app shop, deployed into the namespace NS: a Deployment and a
// ConfigMap.
var dryRunFiles = map[string]string{
	"apps/shop/kustomization.yaml": "resources:\n- web.yaml\n- cm.yaml\n",
	"apps/shop/web.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n" +
		"  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.0\n",
	"apps/shop/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: slow\n",
}

// dryRunChange breaks three objects and adds a valid one: a negative replica count
// (web.yaml line 6), a namespace that does not exist (cm.yaml line 5), an empty
// image of the second container of a new Deployment (api.yaml line 16).
var dryRunChange = map[string]string{
	"apps/shop/kustomization.yaml": "resources:\n- web.yaml\n- cm.yaml\n- api.yaml\n- extra.yaml\n",
	"apps/shop/web.yaml":           strings.Replace(dryRunFiles["apps/shop/web.yaml"], "replicas: 1", "replicas: -1", 1),
	"apps/shop/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: no-such-namespace\ndata:\n  mode: fast\n",
	"apps/shop/api.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  selector:\n    matchLabels: {app: api}\n" +
		"  template:\n    metadata:\n      labels: {app: api}\n    spec:\n      containers:\n      - name: sidecar\n        image: busybox:1.36\n" +
		"      - name: api\n        image: \"\"\n",
	"apps/shop/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  token: s3cr3t-value\n",
}

// countingDryRun is the real cluster access, counting the objects sent.
type countingDryRun struct {
	clusters clusteraccess.Clusters
	sent     atomic.Int32
}

func (c *countingDryRun) DryRunEach(ctx context.Context, ref clusteraccess.Ref, objects []map[string]any) ([]clusteraccess.DryRunRejection, error) {
	c.sent.Add(int32(len(objects)))
	return c.clusters.DryRunEach(ctx, ref, objects)
}

type teamConnections struct{ team string }

func (c teamConnections) ConnectedClusters(context.Context, int64, string) (string, []string, error) {
	return c.team, []string{"prod"}, nil
}

// newDryRunEnv is a checkEnv of dryRunFiles and policy (the .kukie.yml on main)
// whose cluster prod is a real API server, registered for the team as the service
// registers it.
func newDryRunEnv(t *testing.T, policy string) (*checkEnv, *countingDryRun, *kubetest.Env, string) {
	t.Helper()
	k := kubetest.Start(t)
	ns := k.Namespace(t, "shop")
	e := newCheckEnvOf(t, withFiles(dryRunFiles, map[string]string{".kukie.yml": policy}), []string{"shop"})
	apps := e.checker.Applications.(fixedApplications).apps
	apps[0].Spec.Destination = argocd.AppDestination{Server: argocd.InClusterServer, Namespace: ns}

	ctx := context.Background()
	db := storetest.SQLite(t)
	team, err := db.CreateTeam(ctx, "shop-team")
	if err != nil {
		t.Fatal(err)
	}
	box, err := sealed.New(bytes.Repeat([]byte{7}, sealed.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := box.Seal(k.Kubeconfig, store.CredentialsAssociatedData(team.ID, "prod"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCluster(ctx, store.Cluster{TeamID: team.ID, Name: "prod", Access: store.ClusterKubeconfig, SealedCredentials: creds}); err != nil {
		t.Fatal(err)
	}
	dry := &countingDryRun{clusters: clusteraccess.Clusters{DB: db, Registry: kube.NewClusters(kube.Options{}), Credentials: box}}
	e.checker.Connections = teamConnections{team.ID}
	e.checker.DryRun = dry
	return e, dry, k, ns
}

const dryRunPolicy = "rules:\n  dry_run: {level: error}\n"

// TestPullPolicyDryRunAnnotatesRefusals: a pull request from a branch of the
// repository itself has its changed objects dry-run against the destination
// cluster, a real API server; each object it refuses is a failure annotation on
// the manifest line of the field it names, the object it accepts is none, and
// nothing is stored in the cluster.
func TestPullPolicyDryRunAnnotatesRefusals(t *testing.T) {
	e, dry, k, ns := newDryRunEnv(t, dryRunPolicy)
	head := e.openPull(t, dryRunChange)

	run := e.policyRun(t, head)
	sum := run.GetOutput().GetSummary()
	if run.GetConclusion() != github.ConclusionFailure {
		t.Fatalf("kukie/policy %s, want failure:\n%s", run.GetConclusion(), sum)
	}
	if got := dry.sent.Load(); got != 4 {
		t.Errorf("%d objects sent, want the 4 the change adds or modifies", got)
	}
	anns := e.annotations(t, run.GetID())
	want := []string{
		"failure apps/shop/api.yaml:16", // spec.template.spec.containers[1].image: Required value
		"failure apps/shop/cm.yaml:5",   // namespaces "no-such-namespace" not found
		"failure apps/shop/web.yaml:6",  // spec.replicas: Invalid value
	}
	if got := marks(anns); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("annotations:\n%s\nwant:\n%s\nsummary:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), sum)
	}
	for _, a := range anns {
		if a.GetTitle() != "Policy: dry_run" || !strings.Contains(a.GetMessage(), "refuses it in a server-side dry-run") {
			t.Errorf("annotation %s: %q", a.GetTitle(), a.GetMessage())
		}
	}
	byPath := map[string]string{}
	for _, a := range anns {
		byPath[a.GetPath()] = a.GetMessage()
	}
	if m := byPath["apps/shop/web.yaml"]; !strings.Contains(m, "spec.replicas") || !strings.Contains(m, "Deployment "+ns+"/web") {
		t.Errorf("web.yaml annotation %q, want the API server's words on spec.replicas for Deployment %s/web", m, ns)
	}
	if m := byPath["apps/shop/cm.yaml"]; !strings.Contains(m, `"no-such-namespace" not found`) {
		t.Errorf("cm.yaml annotation %q, want the missing namespace", m)
	}
	for _, w := range []string{"| dry_run | error | 3 |", "Server-side dry-run: rejected (`4 changed objects sent, 3 refused`)"} {
		if !strings.Contains(sum, w) {
			t.Errorf("summary lacks %q:\n%s", w, sum)
		}
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	if list, err := k.Dynamic.Resource(deployments).Namespace(ns).List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("deployments in %s after a dry-run: %v (%v)", ns, list, err)
	}
}

// TestPullPolicyDryRunAcceptsAValidChange: a change the cluster accepts passes the
// rule and says how many objects were sent.
func TestPullPolicyDryRunAcceptsAValidChange(t *testing.T) {
	e, dry, _, _ := newDryRunEnv(t, dryRunPolicy)
	head := e.openPull(t, map[string]string{"apps/shop/cm.yaml": strings.Replace(dryRunFiles["apps/shop/cm.yaml"], "slow", "fast", 1)})

	run := e.policyRun(t, head)
	sum := run.GetOutput().GetSummary()
	if run.GetConclusion() != github.ConclusionSuccess || !strings.Contains(sum, "Server-side dry-run: passed (`1 changed objects sent, 0 refused`)") {
		t.Fatalf("kukie/policy %s, want success with the dry-run passed:\n%s", run.GetConclusion(), sum)
	}
	if got := dry.sent.Load(); got != 1 {
		t.Errorf("%d objects sent, want 1", got)
	}
}

// TestPullPolicyNeverDryRunsAFork: a fork's pull request with the same change is
// only rendered; nothing reaches the cluster, and the summary says why.
func TestPullPolicyNeverDryRunsAFork(t *testing.T) {
	e, dry, _, _ := newDryRunEnv(t, dryRunPolicy)
	e.gh.OpenForkPullRequest(t, checkRepo, "mallory", "patch-1", "main", "From a fork", dryRunChange)
	e.deliver(t, e.pullHandler(), "pull_request", "opened")
	head := e.gh.PullRequests(t, checkRepo)[0].GetHead().GetSHA()

	run := e.policyRun(t, head)
	sum := run.GetOutput().GetSummary()
	if got := dry.sent.Load(); got != 0 {
		t.Fatalf("%d objects of a fork sent to the cluster", got)
	}
	if run.GetConclusion() != github.ConclusionSuccess || !strings.Contains(sum, "Server-side dry-run: not run: this pull request's head is a fork's branch") {
		t.Fatalf("kukie/policy %s, want success saying the fork is not dry-run:\n%s", run.GetConclusion(), sum)
	}
	if anns := e.annotations(t, run.GetID()); len(anns) != 0 {
		t.Errorf("annotations on a fork's check: %s", marks(anns))
	}
}

// TestPullPolicyDryRunOffSendsNothing: with the rule off, a pull request from the
// repository itself sends nothing and the summary speaks of no dry-run.
func TestPullPolicyDryRunOffSendsNothing(t *testing.T) {
	e, dry, _, _ := newDryRunEnv(t, "rules:\n  image_digest: {level: notice}\n  dry_run: {level: off}\n")
	head := e.openPull(t, dryRunChange)

	run := e.policyRun(t, head)
	sum := run.GetOutput().GetSummary()
	if got := dry.sent.Load(); got != 0 {
		t.Fatalf("%d objects sent with the rule off", got)
	}
	if run.GetConclusion() != github.ConclusionSuccess || strings.Contains(sum, "dry-run") || strings.Contains(sum, "dry_run") {
		t.Fatalf("kukie/policy %s, want success without a dry-run:\n%s", run.GetConclusion(), sum)
	}
}

// TestPullPolicyDryRunOnARerun: the Re-run button checks the pull request's head
// as GitHub reads it, and a branch of the repository itself is dry-run again.
func TestPullPolicyDryRunOnARerun(t *testing.T) {
	e, dry, _, _ := newDryRunEnv(t, dryRunPolicy)
	head := e.openPull(t, dryRunChange)
	first := dry.sent.Load()
	e.gh.RerequestCheckSuite(t, checkRepo, head)
	e.deliver(t, &CheckSuite{Base: e.base, Pipeline: &trackingPipeline{}, Checks: e.checker}, "check_suite", "rerequested")
	if got := dry.sent.Load(); first != 4 || got != 8 {
		t.Fatalf("%d objects sent by the check and %d by the re-run, want 4 each", first, got-first)
	}
	if run := e.policyRun(t, head); run.GetConclusion() != github.ConclusionFailure {
		t.Fatalf("kukie/policy after the re-run %s, want failure:\n%s", run.GetConclusion(), run.GetOutput().GetSummary())
	}
}

// TestPullPolicyDryRunsOnlyTheClusterArgoCDRunsIn: an Application deploying to
// another cluster than the one it is read from has nothing sent, since the
// service would ask the wrong API server; the summary says so.
func TestPullPolicyDryRunsOnlyTheClusterArgoCDRunsIn(t *testing.T) {
	e, dry, _, ns := newDryRunEnv(t, dryRunPolicy)
	e.checker.Applications.(fixedApplications).apps[0].Spec.Destination = argocd.AppDestination{Server: "https://spoke.example:6443", Namespace: ns}
	head := e.openPull(t, dryRunChange)

	run := e.policyRun(t, head)
	sum := run.GetOutput().GetSummary()
	if got := dry.sent.Load(); got != 0 {
		t.Fatalf("%d objects sent for another cluster's Application", got)
	}
	if run.GetConclusion() != github.ConclusionSuccess ||
		!strings.Contains(sum, "Server-side dry-run: not run: not sent for `argocd/shop (cluster prod)`: they deploy to a cluster other than the one their Application is read from") {
		t.Fatalf("kukie/policy %s:\n%s", run.GetConclusion(), sum)
	}
}
