package render

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/kustomize/v5/commands/edit"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// kustomizeDeps are the field validator and resource factory the kustomize CLI
// hands its edit commands.
var kustomizeDeps = provider.NewDefaultDepProvider()

// applyArgoEdits changes the kustomization of dir (canonical, relative to the
// repository) in v the way Argo CD's repo-server does before "kustomize build":
// the same "kustomize edit" commands with the same arguments, in the same order
// (nameprefix, namesuffix, image, replicas, label, annotation, namespace), then
// the inline patches appended by rewriting the file as Argo CD rewrites it, then
// "edit add component". settings names where the options are set in the
// Application (spec.source, spec.sources[i]), for an error. The commands are kustomize's own, run in process on v,
// which keeps what they write: the repository is never written.
func applyArgoEdits(v *view, dir string, o KustomizeOptions, settings string) error {
	fs := &cwdFS{v: v, dir: abs(dir)}
	run := func(option string, args ...string) error {
		cmd := edit.NewCmdEdit(fs, kustomizeDeps.GetFieldValidator(), kustomizeDeps.GetResourceFactory(), io.Discard)
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			return fmt.Errorf("%s.kustomize.%s: kustomize edit %s: %w", settings, option, strings.Join(args[:2], " "), err)
		}
		return nil
	}
	subst := func(s string) string { return envsubst(s, o.Env) }
	if o.NamePrefix != "" {
		if err := run("namePrefix", "set", "nameprefix", "--", o.NamePrefix); err != nil {
			return err
		}
	}
	if o.NameSuffix != "" {
		if err := run("nameSuffix", "set", "namesuffix", "--", o.NameSuffix); err != nil {
			return err
		}
	}
	if len(o.Images) > 0 {
		args := []string{"set", "image"}
		for _, img := range o.Images {
			args = append(args, subst(img))
		}
		if err := run("images", args...); err != nil {
			return err
		}
	}
	if len(o.Replicas) > 0 {
		args := []string{"set", "replicas"}
		for _, name := range slices.Sorted(maps.Keys(o.Replicas)) {
			args = append(args, fmt.Sprintf("%s=%d", name, o.Replicas[name]))
		}
		if err := run("replicas", args...); err != nil {
			return err
		}
	}
	if len(o.CommonLabels) > 0 {
		args := []string{"add", "label"}
		if o.ForceCommonLabels {
			args = append(args, "--force")
		}
		if o.LabelWithoutSelector {
			args = append(args, "--without-selector")
		}
		if o.LabelIncludeTemplates {
			args = append(args, "--include-templates")
		}
		for _, k := range slices.Sorted(maps.Keys(o.CommonLabels)) {
			args = append(args, k+":"+subst(o.CommonLabels[k]))
		}
		if err := run("commonLabels", args...); err != nil {
			return err
		}
	}
	if len(o.CommonAnnotations) > 0 {
		args := []string{"add", "annotation"}
		if o.ForceCommonAnnotations {
			args = append(args, "--force")
		}
		for _, k := range slices.Sorted(maps.Keys(o.CommonAnnotations)) {
			val := o.CommonAnnotations[k]
			if o.CommonAnnotationsEnvsubst {
				val = subst(val)
			}
			args = append(args, k+":"+val)
		}
		if err := run("commonAnnotations", args...); err != nil {
			return err
		}
	}
	if o.Namespace != "" {
		if err := run("namespace", "set", "namespace", "--", o.Namespace); err != nil {
			return err
		}
	}
	if len(o.Patches) > 0 {
		if err := appendPatches(v, dir, o.Patches); err != nil {
			return fmt.Errorf("%s.kustomize.patches: %w", settings, err)
		}
	}
	if components := effectiveComponents(v, dir, o); len(components) > 0 {
		if err := run("components", append([]string{"add", "component"}, components...)...); err != nil {
			return err
		}
	}
	return nil
}

// appendPatches appends patches to the kustomization's own, as Argo CD does:
// there is no "kustomize edit" command for it, so it decodes the file, appends
// to (or sets) "patches" and writes the file back.
func appendPatches(v *view, dir string, patches []map[string]any) error {
	file := ""
	for _, name := range kustomizationNames {
		if k, err := v.kind(path.Join(dir, name)); err == nil && k == kindFile {
			file = path.Join(dir, name)
			break
		}
	}
	if file == "" {
		return errors.New("kustomization file not found in the path")
	}
	data, err := v.read(file)
	if err != nil {
		return err
	}
	var k any
	if err := sigsyaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("decode %s: %w", file, err)
	}
	m, ok := k.(map[string]any)
	if !ok {
		return fmt.Errorf("%s is not a mapping", file)
	}
	list := make([]any, 0, len(patches))
	if existing, set := m["patches"]; set {
		if list, ok = existing.([]any); !ok {
			return fmt.Errorf("the patches field of %s is not a list", file)
		}
	}
	for _, p := range patches {
		list = append(list, p)
	}
	m["patches"] = list
	out, err := sigsyaml.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", file, err)
	}
	return v.WriteFile(abs(file), out)
}

var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// effectiveComponents are the components Argo CD adds. With
// IgnoreMissingComponents it keeps the first component whose directory holds a
// kustomization file and ends the search there: Argo CD 3.6 leaves its loop over
// the components at the first one found, so later components are never added.
func effectiveComponents(v *view, dir string, o KustomizeOptions) []string {
	if !o.IgnoreMissingComponents {
		return o.Components
	}
	for _, c := range o.Components {
		d, ok := cleanRel(path.Join(dir, c))
		if !ok {
			continue // outside the repository: Argo CD's root-confined stat fails too
		}
		for _, name := range kustomizationNames {
			if k, err := v.kind(path.Join(d, name)); err == nil && k == kindFile {
				return []string{c}
			}
		}
	}
	return nil
}

// envsubst expands $NAME and ${NAME} from env as Argo CD does (os.Expand, "$$"
// for "$", an unknown name empty).
func envsubst(s string, env map[string]string) string {
	return os.Expand(s, func(name string) string {
		if name == "$" {
			return "$"
		}
		return env[name]
	})
}

// cwdFS is the view as the kustomize CLI sees the file system when it runs in
// dir: relative paths are relative to dir, and so are the matches of a relative
// glob.
type cwdFS struct {
	v   *view
	dir string
}

var _ filesys.FileSystem = (*cwdFS)(nil)

func (f *cwdFS) abs(p string) string {
	if path.IsAbs(filepath.ToSlash(p)) {
		return p
	}
	return path.Join(f.dir, filepath.ToSlash(p))
}

func (f *cwdFS) Create(p string) (filesys.File, error) { return f.v.Create(f.abs(p)) }
func (f *cwdFS) Mkdir(p string) error                  { return f.v.Mkdir(f.abs(p)) }
func (f *cwdFS) MkdirAll(p string) error               { return f.v.MkdirAll(f.abs(p)) }
func (f *cwdFS) RemoveAll(p string) error              { return f.v.RemoveAll(f.abs(p)) }
func (f *cwdFS) Open(p string) (filesys.File, error)   { return f.v.Open(f.abs(p)) }
func (f *cwdFS) IsDir(p string) bool                   { return f.v.IsDir(f.abs(p)) }
func (f *cwdFS) ReadDir(p string) ([]string, error)    { return f.v.ReadDir(f.abs(p)) }
func (f *cwdFS) Exists(p string) bool                  { return f.v.Exists(f.abs(p)) }
func (f *cwdFS) ReadFile(p string) ([]byte, error)     { return f.v.ReadFile(f.abs(p)) }
func (f *cwdFS) WriteFile(p string, data []byte) error { return f.v.WriteFile(f.abs(p), data) }
func (f *cwdFS) Walk(p string, fn filepath.WalkFunc) error {
	return f.v.Walk(f.abs(p), fn)
}

func (f *cwdFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	return f.v.CleanedAbs(f.abs(p))
}

func (f *cwdFS) Glob(pattern string) ([]string, error) {
	matches, err := f.v.Glob(f.abs(pattern))
	if err != nil || path.IsAbs(filepath.ToSlash(pattern)) {
		return matches, err
	}
	// The view answers with the canonical path; a relative pattern matches as
	// written, as filepath.Glob answers it.
	dir := path.Dir(filepath.ToSlash(pattern))
	out := make([]string, len(matches))
	for i, m := range matches {
		out[i] = path.Join(dir, path.Base(m))
	}
	sort.Strings(out)
	return out, nil
}
