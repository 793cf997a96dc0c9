package main

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kukie/kukie-gitops/kube/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// startDemo starts the demo as go run ./hack/demo would, on a free port.
func startDemo(t *testing.T, opts options) (*demo, string) {
	t.Helper()
	opts.addr, opts.dir = "127.0.0.1:0", t.TempDir()
	d, err := start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start the demo: %v", err)
	}
	t.Cleanup(func() {
		if err := d.close(); err != nil {
			t.Errorf("stop the demo: %v", err)
		}
	})
	var out strings.Builder
	d.printInstructions(&out)
	return d, out.String()
}

// change is the change API's answer, as far as the test reads it.
type change struct {
	Code        string `json:"code"`
	Status      string `json:"status"`
	Branch      string `json:"branch"`
	PullRequest *struct {
		Number int    `json:"number"`
		URL    string `json:"url"`
	} `json:"pull_request"`
}

// waitChange polls the change until cond holds or a minute passed.
func waitChange(t *testing.T, d *demo, code, what string, cond func(change) bool) change {
	t.Helper()
	var c change
	for range 1200 {
		if err := d.call(http.MethodGet, "/api/v1/changes/"+code, nil, http.StatusOK, &c); err != nil {
			t.Fatal(err)
		}
		if cond(c) {
			return c
		}
		time.Sleep(50 * time.Millisecond)
	}
	logs := readFile(t, d.logFile)
	t.Fatalf("change %s never %s: %+v\nlog:\n%s", code, what, c, logs[max(0, len(logs)-4000):])
	return c
}

// TestDemoRunsTheLoopOnTheUsersCluster runs the demo against a cluster (a real API
// server, with Argo CD's Application type), requests the change the instructions
// show through the HTTP API, sees its pull request in the simulated GitHub, and
// merges it as the instructions say, after which the service follows the deployment.
func TestDemoRunsTheLoopOnTheUsersCluster(t *testing.T) {
	env := kubetest.Start(t)
	d, text := startDemo(t, options{kubeconfig: env.KubeconfigPath})
	for _, want := range []string{"GitHub is SIMULATED", d.url + "/api/v1/changes", "export KUKIE_TOKEN=" + d.token.Reveal(),
		d.gh.APIURL() + "repos/demo/shop/pulls", "namespace kukie-demo"} {
		if !strings.Contains(text, want) {
			t.Errorf("the instructions do not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "cluster           none") {
		t.Fatalf("the demo ran without the cluster:\n%s", text)
	}

	var c change
	if err := d.call(http.MethodPost, "/api/v1/changes", changeRequest(), http.StatusAccepted, &c); err != nil {
		t.Fatal(err)
	}
	c = waitChange(t, d, c.Code, "opened a pull request", func(c change) bool { return c.Status == "pr_open" && c.PullRequest != nil })
	prs := d.gh.PullRequests(t, fullRepo)
	if len(prs) != 1 || prs[0].GetNumber() != c.PullRequest.Number || prs[0].GetHead().GetRef() != c.Branch {
		t.Fatalf("pull requests in the simulated GitHub: %v, want #%d from %s", prs, c.PullRequest.Number, c.Branch)
	}
	edited, ok := d.gh.FileAt(t, fullRepo, c.Branch, appPath+"/deployment.yaml")
	if !ok || !strings.Contains(edited, "replicas: 3") {
		t.Errorf("the pull request's deployment.yaml:\n%s", edited)
	}

	merge := strings.Replace(MergePath, "{number}", strconv.Itoa(c.PullRequest.Number), 1)
	if err := d.call(http.MethodPost, merge, nil, http.StatusOK, nil); err != nil {
		t.Fatal(err)
	}
	waitChange(t, d, c.Code, "followed the merge", func(c change) bool { return c.Status == "deploying" })
	if err := d.call(http.MethodPost, merge, nil, http.StatusConflict, nil); err != nil {
		t.Errorf("merging it again: %v", err)
	}
}

// TestDemoWithoutAClusterSaysWhy: without a kubeconfig, and on a cluster without Argo
// CD, the demo still runs the service and says plainly why no pull request can be
// made, with the offline planner's command; -install-crd adds the Application type.
func TestDemoWithoutAClusterSaysWhy(t *testing.T) {
	d, text := startDemo(t, options{})
	for _, want := range []string{"GitHub is SIMULATED", "cluster           none: no -kubeconfig was given", "404 cluster_not_found",
		"go run . plan --repo " + d.dir + "/sample-repo --app apps/web --type Directory scale deployment/web --replicas 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("the instructions do not say %q:\n%s", want, text)
		}
	}
	if err := d.call(http.MethodGet, "/readyz", nil, http.StatusOK, nil); err != nil {
		t.Errorf("the service is not ready: %v", err)
	}
	var answer struct {
		Error string `json:"error"`
	}
	if err := d.call(http.MethodPost, "/api/v1/changes", changeRequest(), http.StatusNotFound, &answer); err != nil || answer.Error != "cluster_not_found" {
		t.Errorf("a change request without a cluster: %+v %v", answer, err)
	}

	bare := kubetest.StartPrivate(t, kubetest.Options{WithoutApplicationCRD: true})
	_, text = startDemo(t, options{kubeconfig: bare.KubeconfigPath})
	if !strings.Contains(text, "cluster           none: the cluster has no Argo CD") || !strings.Contains(text, "-install-crd") {
		t.Errorf("on a cluster without Argo CD the instructions say:\n%s", text)
	}
	_, text = startDemo(t, options{kubeconfig: bare.KubeconfigPath, installCRD: true})
	if !strings.Contains(text, "CustomResourceDefinition applications.argoproj.io") {
		t.Errorf("with -install-crd the instructions say:\n%s", text)
	}
	if _, err := bare.Dynamic.Resource(crdGVR).Get(context.Background(), applicationCRD, metav1.GetOptions{}); err != nil {
		t.Errorf("the Application CRD is not installed: %v", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
