package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// parsedNodes counts the nodes yaml.v3 builds for data, aliases not followed.
func parsedNodes(t *testing.T, data []byte) int {
	t.Helper()
	var count func(n *yaml.Node) int
	count = func(n *yaml.Node) int {
		c := 1
		for _, child := range n.Content {
			c += count(child)
		}
		return c
	}
	total := 0
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return total
		}
		if err != nil {
			return -1 // not YAML: nothing to bound
		}
		total += count(&doc)
	}
}

// TestEstimateNodesNeverUndercounts checks the pre-parse bound against what the
// parser builds, for shapes that pack nodes tightly and for every YAML file of the
// project's fixtures.
func TestEstimateNodesNeverUndercounts(t *testing.T) {
	inputs := map[string]string{
		"flow sequence":               "[0,0,0,0]",
		"flow mapping without values": "{a, b, c}",
		"flow mapping":                "{a: 1, b: [1, 2], c: {d: e}}",
		"nested flow":                 "[[[[[]]]]]",
		"single pair in flow":         "[a: 1, b: 2]",
		"block mapping":               "a: 1\nb:\n  c: 2\n",
		"empty values":                "a:\nb:\nc:\n",
		"nested block sequences":      "- - - a\n- - b\n",
		"complex keys":                "? a\n: b\n? [c]\n: d\n",
		"aliases":                     "a: &x [1, 2]\nb: *x\nc: {<<: *x}\n",
		"documents":                   "---\n---\na\n---\n- b\n...\n",
		"scalar root":                 "a",
		"json":                        `{"a":1,"b":[1,2,{"c":null}]}`,
		"multi-line scalar":           "a: one\n  two\n  three\n",
		"tags and anchors":            "a: !!str &y 1\nb: !custom [x]\n",
	}
	err := filepath.WalkDir("../testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") || strings.HasSuffix(p, ".json")) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		inputs[p] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range inputs {
		if parsed, est := parsedNodes(t, []byte(in)), estimateNodes([]byte(in)); est < parsed {
			t.Errorf("%s: estimated %d nodes, the parser builds %d", name, est, parsed)
		}
	}
}

// TestScanYAMLCountsExpandedNodes checks that an alias costs what its anchor
// expands to, however often it is used, without refusing reuse in moderation.
func TestScanYAMLCountsExpandedNodes(t *testing.T) {
	s := scanYAML("f.yaml", []byte("a: &x [1, 2, 3]\nb: *x\nc: *x\n---\nd: 1\n"))
	if s.err != nil {
		t.Fatal(s.err)
	}
	// Document 1: doc, mapping, 3 keys, the sequence and its 3 items, and twice
	// the sequence again through the aliases (4 nodes each). Document 2: 4 nodes.
	if s.docs != 2 || s.nodes != 1+1+3+4+8+4 {
		t.Fatalf("got %d documents, %d nodes", s.docs, s.nodes)
	}
	if s := scanYAML("f.yaml", []byte("not: &x [yaml")); s.err != nil || s.docs != 0 {
		t.Fatalf("a file that does not parse: %+v", s)
	}
	// Without anchors, a small file counts by its estimate: never less than it holds.
	small := []byte("a: 1\n---\nb: [2, 3]\n")
	if s := scanYAML("f.yaml", small); s.err != nil || s.docs < 2 || s.nodes < parsedNodes(t, small) {
		t.Fatalf("a small file without anchors: %+v", s)
	}
}

// slowKustomization is an app within every bound that kustomize still takes a
// while to build: each of its resources is checked against all before it.
func slowKustomization(t *testing.T) string {
	t.Helper()
	var docs strings.Builder
	for i := range 990 {
		fmt.Fprintf(&docs, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\ndata:\n  k: v\n", i)
	}
	return testtree.Write(t, map[string]string{
		"app/deploy.yaml":        twoContainerDeployment,
		"app/many.yaml":          docs.String(),
		"app/kustomization.yaml": "resources:\n- deploy.yaml\n- many.yaml\n",
	})
}

// TestPlanOutlastingItsTimeoutIsRefused shortens the timeout below what the build
// takes: the plan is refused as too slow and the build abandoned; the next build
// runs once the abandoned one has stopped.
func TestPlanOutlastingItsTimeoutIsRefused(t *testing.T) {
	repo := slowKustomization(t)
	app := Application{Name: "web", Path: "app", SourceType: SourceKustomize, Namespace: "web"}
	req := Request{RepoDir: repo, Apps: []Application{app}, Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 3}}}
	saved := timeout.Load()
	t.Cleanup(func() { timeout.Store(saved) })
	timeout.Store(int64(20 * time.Millisecond))
	_, err := Plan(context.Background(), req)
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Code != CodeTimeout {
		t.Fatalf("got %v, want a %s refusal", err, CodeTimeout)
	}
	// Generous: this plan first waits for the abandoned build to stop.
	timeout.Store(int64(10 * time.Minute))
	small := testtree.Write(t, map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/kustomization.yaml": "resources:\n- deploy.yaml\n"})
	req.RepoDir = small
	if _, err := Plan(context.Background(), req); err != nil {
		t.Fatalf("the plan after an abandoned build: %v", err)
	}
}

// TestPlanCancelledByItsCallerIsNoRefusal: a caller that gives up (a signal, a
// shutdown) gets the context's error, never a verdict on the repository.
func TestPlanCancelledByItsCallerIsNoRefusal(t *testing.T) {
	repo := slowKustomization(t)
	app := Application{Name: "web", Path: "app", SourceType: SourceKustomize, Namespace: "web"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Plan(ctx, Request{RepoDir: repo, Apps: []Application{app}, Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 3}}})
	var ref *Refusal
	if !errors.Is(err, context.Canceled) || errors.As(err, &ref) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestBuildThatWaitedForTheKustomizeSlotSaysSo: a render whose kustomize build
// never started, because another build (one abandoned at its deadline runs on)
// held the one slot until this render's deadline, is refused as a timeout that
// says so, naming the app and kustomization, not as a repository too slow to
// render.
func TestBuildThatWaitedForTheKustomizeSlotSaysSo(t *testing.T) {
	saved := timeout.Load()
	t.Cleanup(func() { timeout.Store(saved) })
	timeout.Store(int64(200 * time.Millisecond))
	kustomizeSlot <- struct{}{}
	t.Cleanup(func() { <-kustomizeSlot })
	repo := testtree.Write(t, map[string]string{"app/deployment.yaml": twoContainerDeployment, "app/kustomization.yaml": "resources:\n- deployment.yaml\n"})
	_, err := Plan(context.Background(), Request{RepoDir: repo,
		Apps: []Application{{Name: "web", Path: "app", SourceType: SourceKustomize, Namespace: "web"}}, App: "web",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Replicas: &Replicas{Count: 3}}})
	var ref *Refusal
	const want = "application web: kustomize build app: rendering took longer than 200ms waiting for other kustomize builds to end (as many run at once as there are kustomize workers); this render's build never started"
	if !errors.As(err, &ref) || ref.Code != CodeTimeout || ref.App != "web" || ref.Reason != want {
		t.Fatalf("err = %v\nwant refused (%s): %s", err, CodeTimeout, want)
	}
}
