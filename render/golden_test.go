package render

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render/yamledit"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/render from the current output")

const goldenRoot = "../testdata/render"

// goldenRequest is request.yaml of a golden case.
type goldenRequest struct {
	App    string        `json:"app"`
	Apps   []Application `json:"apps"`
	Target objref.Target `json:"target"`
	Change Change        `json:"change"`
	// ShowRender also writes the after-render of the changed objects
	// (rendered.yaml): for cases about what the render itself produces.
	ShowRender bool `json:"showRender,omitempty"`
}

// goldenCharts is the chart repository of a golden case: <name>-<version>/ holds
// the chart a Chart.lock pins as name at version (from any repository), packaged
// with the Helm SDK when it is fetched.
type goldenCharts string

func (g goldenCharts) FetchChart(_ context.Context, dep ChartDependency) ([]byte, error) {
	ch, err := loader.LoadDir(filepath.Join(string(g), dep.Name+"-"+dep.Version))
	if err != nil {
		return nil, fmt.Errorf("the repository holds no %s %s", dep.Name, dep.Version)
	}
	p, err := chartutil.Save(ch, os.TempDir())
	if err != nil {
		return nil, err
	}
	defer os.Remove(p)
	return os.ReadFile(p)
}

// TestGolden runs every case under testdata/render: <case>/input is the repository,
// <case>/request.yaml the request, <case>/repository (when present) the charts
// its Chart.lock files fetch, <case>/expected what Plan must produce (the
// verdict, the git diff, the cluster diff, the new content of every edited file and
// the list of removed files).
// Run with -update to rewrite expected/ and review the result by eye.
func TestGolden(t *testing.T) {
	entries, err := os.ReadDir(goldenRoot)
	if err != nil {
		t.Fatalf("read golden cases: %v", err)
	}
	var cases []string
	for _, e := range entries {
		if e.IsDir() {
			cases = append(cases, e.Name())
		}
	}
	if len(cases) < 20 {
		t.Fatalf("found %d golden cases, expected the full set", len(cases))
	}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			runGolden(t, filepath.Join(goldenRoot, name))
		})
	}
}

// readGoldenRequest reads the request of the golden case in dir.
func readGoldenRequest(t *testing.T, dir string) goldenRequest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "request.yaml"))
	if err != nil {
		t.Fatalf("read request: %v", err)
	}
	var req goldenRequest
	if err := sigsyaml.UnmarshalStrict(raw, &req); err != nil {
		t.Fatalf("parse request: %v", err)
	}
	return req
}

func runGolden(t *testing.T, dir string) {
	req := readGoldenRequest(t, dir)
	repo := filepath.Join(t.TempDir(), "repo")
	copyTree(t, filepath.Join(dir, "input"), repo)
	before := snapshot(t, repo)

	ctx := context.Background()
	if _, err := os.Stat(filepath.Join(dir, "repository")); err == nil {
		ctx = WithCharts(ctx, goldenCharts(filepath.Join(dir, "repository")))
	}
	res, err := Plan(ctx, Request{RepoDir: repo, Apps: req.Apps, App: req.App, Target: req.Target, Change: req.Change})

	if after := snapshot(t, repo); !equalSnapshots(before, after) {
		t.Fatalf("Plan modified the input repository")
	}
	got := filepath.Join(t.TempDir(), "expected")
	writeOutcome(t, got, res, err)
	if req.ShowRender && res != nil {
		writeRendered(t, got, res.Changed)
	}
	want := filepath.Join(dir, "expected")
	if *update {
		if err := os.RemoveAll(want); err != nil {
			t.Fatal(err)
		}
		copyTree(t, got, want)
		return
	}
	compareTrees(t, want, got)
	if res != nil {
		for _, e := range res.Edits {
			if _, err := yamledit.Documents(e.New); err != nil {
				t.Errorf("edited %s does not parse: %v", e.Path, err)
			}
		}
	}
}

// writeOutcome writes what Plan returned as the files of a golden expected/ dir.
func writeOutcome(t *testing.T, dir string, res *Result, err error) {
	t.Helper()
	write := func(name string, data []byte) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var ref *Refusal
	switch {
	case errors.As(err, &ref):
		var b strings.Builder
		fmt.Fprintf(&b, "refused: %s\napp: %s\nreason: %s\n", ref.Code, ref.App, ref.Reason)
		for _, a := range ref.Attempts {
			fmt.Fprintf(&b, "attempt: %s %v verified=%v\n", a.Strategy, a.Files, a.Verified)
		}
		write("verdict.txt", []byte(b.String()))
		return
	case err != nil:
		t.Fatalf("Plan failed: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "verified: %s\napp: %s\n", res.Strategy, res.App)
	if res.Renamed != "" {
		fmt.Fprintf(&b, "renamed: %s\n", res.Renamed)
	}
	for _, r := range res.Renames {
		fmt.Fprintf(&b, "rename: [%s] %s %s\n", r.App, r.APIVersion, r)
	}
	for _, a := range res.Verification.Apps {
		fmt.Fprintf(&b, "compared: %s objects=%d changed=%d\n", a.App, a.Objects, a.Changed)
	}
	for _, a := range res.Verification.Attempts {
		fmt.Fprintf(&b, "attempt: %s %v verified=%v\n", a.Strategy, a.Files, a.Verified)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(&b, "warning: %s: %s\n", w.Code, w)
	}
	write("verdict.txt", []byte(b.String()))
	write("git.diff", []byte(res.GitDiff))
	var c strings.Builder
	for _, d := range res.ClusterDiff {
		action := d.Action
		if note := RenameNote(res.Renames, d); note != "" {
			action += " (" + note + ")"
		}
		fmt.Fprintf(&c, "[%s] %s %s %s/%s %s\n", d.App, d.APIVersion, d.Kind, d.Namespace, d.Name, action)
		for _, ch := range d.Changes {
			fmt.Fprintf(&c, "  %s: %q -> %q\n", ch.Path, ch.Before, ch.After)
		}
	}
	write("cluster.txt", []byte(c.String()))
	var removed []string
	for _, e := range res.Edits {
		if e.New == nil && !e.Created {
			removed = append(removed, e.Path+"\n")
			continue
		}
		write("files/"+e.Path, e.New)
	}
	if len(removed) > 0 {
		write("removed.txt", []byte(strings.Join(removed, "")))
	}
}

// writeRendered writes the changed objects, after the edit, as one YAML stream.
func writeRendered(t *testing.T, dir string, changed []ChangedObject) {
	t.Helper()
	var b bytes.Buffer
	for _, c := range changed {
		out, err := sigsyaml.Marshal(c.Object)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "# %s\n%s---\n", c.App, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "rendered.yaml"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", from, err)
	}
}

func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalSnapshots(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	w, g := relSnapshot(t, want), relSnapshot(t, got)
	var names []string
	for k := range w {
		names = append(names, k)
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		wv, wok := w[n]
		gv, gok := g[n]
		switch {
		case !wok:
			t.Errorf("unexpected output %s:\n%s", n, gv)
		case !gok:
			t.Errorf("missing output %s", n)
		case !bytes.Equal(wv, gv):
			t.Errorf("%s differs\n--- want\n%s\n--- got\n%s", n, wv, gv)
		}
	}
}

func relSnapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return out
	}
	for p, data := range snapshot(t, dir) {
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = data
	}
	return out
}
