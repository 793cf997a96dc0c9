package handler

import (
	"fmt"
	"testing"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
)

// monorepo is a repository of n Kustomize Applications, each with a Deployment of
// its own; the first shared of them also include the shared base.
func monorepo(n, shared int) (map[string]string, []string) {
	files := map[string]string{
		"shared/kustomization.yaml": "resources:\n- config.yaml\n",
		"shared/config.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  level: \"0\"\n",
		"docs/README.md":            "how we deploy\n",
	}
	var names []string
	for i := range n {
		name := fmt.Sprintf("app-%04d", i)
		names = append(names, name)
		k := "resources:\n- deploy.yaml\n"
		if i < shared {
			k += "- ../../shared\n"
		}
		files["apps/"+name+"/kustomization.yaml"] = "namePrefix: " + name + "-\n" + k
		files["apps/"+name+"/deploy.yaml"] = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  replicas: 2\n  template:\n    spec:\n" +
			"      containers:\n      - name: app\n        image: registry.example.com/" + name + ":1.0\n"
	}
	return files, names
}

// benchmarkPullCheck measures one pull request's check, from the synchronize
// delivery's arrival at the handler to the completed check run on the fake GitHub,
// for a new head each time that changes file to a new value (so the head's
// snapshot is downloaded every time).
func benchmarkPullCheck(b *testing.B, file, want string) {
	files, names := monorepo(1000, 50)
	e := newCheckEnvOf(b, files, names)
	e.gh.PushCommit(b, checkRepo, "change", map[string]string{file: files[file] + "# 0\n"}, githubtest.DefaultAuthor)
	e.gh.OpenPullRequest(b, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
	h := e.pullHandler()
	// The base's snapshot and its reaches are kept across checks (the archive cache
	// and render's memo), as in the service; the first check of a base pays for
	// them, and is not what a pull request's next push costs.
	e.deliver(b, h, "pull_request", "opened")
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		head := e.gh.PushCommit(b, checkRepo, "change", map[string]string{file: files[file] + fmt.Sprintf("# %d\n", i+1)}, githubtest.DefaultAuthor)
		if file == "shared/config.yaml" {
			head = e.gh.PushCommit(b, checkRepo, "change", map[string]string{file: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  level: \"%d\"\n", i+1)}, githubtest.DefaultAuthor)
		}
		ds := e.gh.DeliveriesOf("pull_request", "synchronize")
		d := ds[len(ds)-1]
		b.StartTimer()
		if err := h.Handle(b.Context(), "pull_request", d.ID, d.Payload); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		run := e.run(b, head)
		if run.GetConclusion() != want {
			b.Fatalf("conclusion %s, want %s: %s", run.GetConclusion(), want, run.GetOutput().GetSummary())
		}
		b.StartTimer()
	}
}

// BenchmarkPullCheckSharedBase: a change of a base 50 of 1,000 Applications
// include; 50 apps rendered twice, diffs and annotations published.
func BenchmarkPullCheckSharedBase(b *testing.B) {
	benchmarkPullCheck(b, "shared/config.yaml", github.ConclusionSuccess)
}

// BenchmarkPullCheckUnreadFile: a change of a file no Application reads.
func BenchmarkPullCheckUnreadFile(b *testing.B) {
	benchmarkPullCheck(b, "docs/README.md", github.ConclusionNeutral)
}
