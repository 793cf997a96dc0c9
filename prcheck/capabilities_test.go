package prcheck_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/prcheck"
)

// countedCapabilities answers caps (or err) and counts the reads by cluster.
type countedCapabilities struct {
	caps kube.Capabilities
	err  error

	mu    sync.Mutex
	reads map[string]int
}

func (c *countedCapabilities) Capabilities(_ context.Context, _, cluster string) (kube.Capabilities, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reads == nil {
		c.reads = map[string]int{}
	}
	c.reads[cluster]++
	return c.caps, c.err
}

// twoClusters connects the repository to prod and edge.
type twoClusters struct{}

func (twoClusters) ConnectedClusters(context.Context, int64, string) (string, []string, error) {
	return "team", []string{"edge", "prod"}, nil
}

// A check asks each cluster for its capabilities once, however many Helm apps of
// it the change reaches, and a cluster that cannot be asked leaves its Helm apps
// to Helm's defaults: the check still renders them, concludes success, and says
// so of each.
func TestCheckAsksEachClusterForItsCapabilitiesOnce(t *testing.T) {
	chart := map[string]string{
		"charts/web/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"charts/web/values.yaml": "size: small\n",
		"charts/web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n" +
			"  size: {{ .Values.size }}\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n",
	}
	for name, c := range map[string]struct {
		caps     *countedCapabilities
		rendered string
		warned   bool
	}{
		"readable":        {caps: &countedCapabilities{caps: kube.Capabilities{KubeVersion: "1.33.7", APIVersions: []string{"v1", "v1/ConfigMap"}}}, rendered: "kube: v1.33.7"},
		"cannot be asked": {caps: &countedCapabilities{err: &kube.Error{Class: argocd.FailureUnreachable, Op: "read the server version", Err: errors.New("dial tcp 10.1.2.3:6443: i/o timeout")}}, rendered: "kube: v1.20.0", warned: true},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, inst, repos, url := fakeRepo(t, chart)
			var apps []argocd.Application
			for _, name := range []string{"web-a", "web-b", "web-c"} {
				apps = append(apps, argocd.Application{Name: name, Namespace: "argocd", Spec: argocd.AppSpec{
					Source:      &argocd.AppSource{RepoURL: url, Path: "charts/web", TargetRevision: "main"},
					Destination: argocd.AppDestination{Server: argocd.InClusterServer, Namespace: "web"}}, Status: argocd.AppStatus{SourceType: "Helm"}})
			}
			checker := &prcheck.Checker{GitHub: repos(), Connections: twoClusters{},
				Applications: applications{apps}, Capabilities: c.caps}
			for i, size := range []string{"large", "huge"} {
				head := s.PushCommit(t, repo, "grow", map[string]string{"charts/web/values.yaml": "size: " + size + "\n"}, githubtest.DefaultAuthor)
				h := prcheck.Head{InstallationID: inst, Repo: repo, RepoURL: url, BaseBranch: "main", BaseSHA: s.Head(t, repo, "main"), HeadSHA: head, Key: "merge_group/grow"}
				if err := checker.Check(ctx, h); err != nil {
					t.Fatal(err)
				}
				runs := s.CheckRuns(t, repo, head)
				var run string
				for _, r := range runs {
					if r.GetName() == github.CheckRunName {
						if r.GetConclusion() != github.ConclusionSuccess {
							t.Fatalf("conclusion %s:\n%s", r.GetConclusion(), r.GetOutput().GetSummary())
						}
						run = r.GetOutput().GetSummary() + "\n" + r.GetOutput().GetText()
					}
				}
				// Three apps in each of two clusters, one read of each cluster per check.
				if want := map[string]int{"edge": i + 1, "prod": i + 1}; c.caps.reads["edge"] != want["edge"] || c.caps.reads["prod"] != want["prod"] {
					t.Fatalf("after %d checks, capabilities read %v, want %v", i+1, c.caps.reads, want)
				}
				if strings.Count(run, c.rendered) != 6 {
					t.Errorf("the six renders do not all show %s:\n%s", c.rendered, run)
				}
				warned := strings.Count(run, "rendered with Helm's default Kubernetes version and API versions (.Capabilities): the cluster could not be asked for them (unreachable)")
				if c.warned && warned != 6 || !c.warned && warned != 0 || strings.Contains(run, "10.1.2.3") {
					t.Errorf("%d apps are said to render with Helm's defaults:\n%s", warned, run)
				}
			}
		})
	}
}
