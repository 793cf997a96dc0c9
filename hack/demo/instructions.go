package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/service"
	"github.com/kukie/kukie-gitops/store"
)

// MergePath merges a pull request in the simulated GitHub, as a person would on
// GitHub's page: GitHub then sends the service its push and pull_request webhooks.
const MergePath = "/demo/pulls/{number}/merge"

// changeRequest is the change the instructions request: web scaled to 3 replicas.
func changeRequest() map[string]any {
	return map[string]any{
		"cluster": clusterName,
		"target":  map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace, "name": "web"},
		"change":  map[string]any{"replicas": map[string]any{"count": 3}},
		"reason":  "the launch doubles traffic", "requested_by": "you@example.com",
	}
}

// mountMerge adds MergePath to the service's routes, for the demo team.
func (d *demo) mountMerge(svc *service.Service) {
	svc.Handle("POST "+MergePath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("number"))
		if err != nil || n <= 0 {
			http.Error(w, "the pull request number is not a positive integer", http.StatusBadRequest)
			return
		}
		sha, err := d.merge(n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "merged pull request #%d of %s as %s\n", n, fullRepo, sha)
	}), server.TeamAuth(store.ScopeChange))
}

// merge merges pull request n; a refusal of the simulated GitHub is returned.
func (d *demo) merge(n int) (sha string, err error) {
	defer recoverFailure(&err)
	return d.gh.Merge(setupTB{d}, fullRepo, n, githubtest.MergeCommit), nil
}

// printInstructions says what runs where, that GitHub is simulated, and how to
// request a change and follow it.
func (d *demo) printInstructions(out io.Writer) {
	auth := `-H "Authorization: Bearer $KUKIE_TOKEN"`
	body, err := json.Marshal(changeRequest())
	if err != nil {
		panic(err) // a literal of strings and numbers
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("kukie-gitops demo")
	p("")
	p("GitHub is SIMULATED: an in-process stand-in for GitHub's API, backed by real git")
	p("repositories on this machine. No GitHub account or App is used and nothing is sent")
	p("to GitHub; pull requests exist only in the stand-in.")
	p("")
	p("  service           %s   (logs: %s)", d.url, d.logFile)
	p("  simulated GitHub  %s   (repository %s, the App installed on it)", d.gh.URL(), fullRepo)
	p("  sample manifests  %s", d.dir+"/sample-repo")
	if d.offline == "" {
		p("  cluster           registered as %q; created there: %s", clusterName, strings.Join(d.created, "; "))
	} else {
		p("  cluster           none: %s.", d.offline)
		p("")
		p("No cluster is registered, so a change request answers 404 cluster_not_found: the")
		p("service takes the Git path only when the cluster shows that Argo CD manages the")
		p("target (deployment/web), never on the request's word. What the Git path would edit")
		p("and verify, offline:")
		p("")
		p("  go run . plan --repo %s/sample-repo --app %s --type Directory scale deployment/web --replicas 3", d.dir, appPath)
		p("")
		p("Point -kubeconfig at a kind, k3d or minikube cluster to see the whole loop.")
	}
	p("")
	p("The demo team's API token:")
	p("")
	p("  export KUKIE_TOKEN=%s", d.token.Reveal())
	p("")
	p("Request a change (deployment/web in %s to 3 replicas):", namespace)
	p("")
	p("  curl -s -X POST %s/api/v1/changes %s -H 'Content-Type: application/json' \\", d.url, auth)
	p("    -d '%s'", body)
	p("")
	p("Follow it with the code from the answer (status, diffs, pull request, check run):")
	p("")
	p("  curl -s %s/api/v1/changes/CODE %s", d.url, auth)
	p("")
	p("Its pull request, in the simulated GitHub (the web page would be %s/%s/pull/NUMBER):", d.gh.URL(), fullRepo)
	p("")
	p("  curl -s %srepos/%s/pulls", d.gh.APIURL(), fullRepo)
	p("")
	p("Merge it as a reviewer would; the service then follows the deployment (nothing syncs")
	p("the simulated repository, so it ends deploy_failed after the demo's 2-minute timeout):")
	p("")
	p("  curl -s -X POST %s%s %s", d.url, strings.Replace(MergePath, "{number}", "NUMBER", 1), auth)
	p("")
	if d.keepDir {
		p("Ctrl-C stops the demo; its files stay in %s.", d.dir)
	} else {
		p("Ctrl-C stops the demo and removes its files.")
	}
	_, _ = io.WriteString(out, b.String())
}
