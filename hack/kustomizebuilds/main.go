// Command kustomizebuilds runs the kustomize builds of one offline plan and
// nothing else: it reads a repository into memory and builds one of its
// kustomizations twice in process, first with origin annotations (the render
// before the edit, which locating needs) and then without (the render after it,
// which verification compares), as package render does.
//
// It links only kustomize, so a process of it is the floor of what a whole
// "kukie-gitops plan" process can cost: the plan command's benchmark
// (BenchmarkPlanProcess/floor in cmd) runs it beside the plan and the kustomize
// CLI. It prints the number of objects each build made.
//
//	go run ./hack/kustomizebuilds REPO PATH
package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	// The plan command's collector settings, so that the floor differs from
	// a plan process only in what it links and does.
	_ "github.com/kukie/kukie-gitops/internal/gcstart"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: kustomizebuilds REPO PATH")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "kustomizebuilds: %v\n", err)
		os.Exit(1)
	}
}

// run builds app of repo twice and prints the number of objects of each build
// to w.
func run(w io.Writer, repo, app string) error {
	repo, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	mem, err := readTree(repo)
	if err != nil {
		return fmt.Errorf("read %s: %w", repo, err)
	}
	dir := filepath.Join(repo, app)
	kfile := filepath.Join(dir, "kustomization.yaml")
	original, err := mem.ReadFile(kfile)
	if err != nil {
		return err
	}
	// The render before the edit asks for origins, as render does, by listing
	// them in the kustomization's buildMetadata (the benchmark's overlay has
	// none of its own).
	withOrigin := append(bytes.Clone(original), []byte("\nbuildMetadata:\n  - "+types.OriginAnnotations+"\n")...)
	for _, k := range [][]byte{withOrigin, original} {
		if err := mem.WriteFile(kfile, k); err != nil {
			return err
		}
		opts := krusty.MakeDefaultOptions()
		opts.PluginConfig = types.DisabledPluginConfig()
		m, err := krusty.MakeKustomizer(opts).Run(mem, dir)
		if err != nil {
			return fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		fmt.Fprintln(w, m.Size())
	}
	return nil
}

// readTree copies the regular files under root into an in-memory file system
// at the same paths, as render builds from its own view of a repository.
func readTree(root string) (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(p, data)
	})
	return mem, err
}
