package policy

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/distribution/reference"

	"github.com/kukie/kukie-gitops/render"
)

// Rule names, as .kukie.yml spells them and findings carry them.
const (
	RuleImageDigest     = "image_digest"
	RuleImageRegistries = "image_registries"
	RuleNamespaces      = "namespaces"
	RuleSecretValues    = "secret_values"
	RuleDeniedKinds     = "denied_kinds"
	RuleDryRun          = "dry_run"
)

// App is one Application's render to check.
type App struct {
	Name string
	// Namespace is the destination namespace: where objects without one land.
	Namespace string
	Objects   []render.Object
}

// Finding is one object breaking one rule. Path and Line (from 1) are the
// manifest line that causes it, when its source is known (a Helm template's is
// not: Path is empty). Message never quotes a Secret's value.
type Finding struct {
	Rule    string
	Level   Level
	App     string
	Object  string
	Message string
	Path    string
	Line    int
}

// Evaluate checks app's objects against the rules that are on. fsys is the tree
// the app was rendered from, read (bounded) to find the lines findings point to;
// nil leaves findings without a line.
func (c *Config) Evaluate(app App, fsys fs.FS) []Finding {
	if !c.Enabled() {
		return nil
	}
	src := newSources(fsys)
	var out []Finding
	for _, o := range app.Objects {
		e := objectEval{c: c, app: app, o: o, src: src, id: describe(o.Manifest, app.Namespace)}
		e.images()
		e.namespace()
		e.secret()
		e.deniedKind()
		out = append(out, e.found...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Line < out[j].Line
	})
	return out
}

// objectEval checks one object.
type objectEval struct {
	c     *Config
	app   App
	o     render.Object
	src   *sources
	id    string
	found []Finding
}

func (e *objectEval) add(rule string, level Level, path []step, format string, args ...any) {
	file, line := e.src.locate(e.o, path)
	e.found = append(e.found, Finding{Rule: rule, Level: level, App: e.app.Name, Object: e.id,
		Message: fmt.Sprintf(format, args...), Path: file, Line: line})
}

// container is one container of a pod template, wherever the kind keeps it:
// its image (hasImage false when it names none) at path, and its body at at.
type container struct {
	name, image string
	hasImage    bool
	path        []step
	body        map[string]any
	at          []step
}

// containers finds every list of containers in the manifest (Pods, workload
// templates, CronJobs' job templates, and custom kinds that embed a pod spec).
func containers(m map[string]any) []container {
	var out []container
	var walk func(v any, path []step)
	walk = func(v any, path []step) {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := append(append([]step(nil), path...), key(k))
				if k == "containers" || k == "initContainers" || k == "ephemeralContainers" {
					if list, ok := v[k].([]any); ok {
						for _, item := range list {
							c, _ := item.(map[string]any)
							if c == nil {
								continue
							}
							name, _ := c["name"].(string)
							image, ok := c["image"].(string)
							at := append(append([]step(nil), p...), named(name))
							out = append(out, container{name: name, image: image, hasImage: ok, path: append(append([]step(nil), at...), key("image")), body: c, at: at})
						}
						continue
					}
				}
				walk(v[k], p)
			}
		case []any:
			for _, item := range v {
				// Lists other than containers are not entered by position: their
				// items have no stable name to find in the source.
				if m, ok := item.(map[string]any); ok {
					if name, ok := m["name"].(string); ok {
						walk(m, append(append([]step(nil), path...), named(name)))
					}
				}
			}
		}
	}
	walk(m, nil)
	return out
}

func (e *objectEval) images() {
	digest, registries := e.c.Rules.ImageDigest.Level, e.c.Rules.ImageRegistries.Level
	if digest == LevelOff && registries == LevelOff {
		return
	}
	for _, ct := range containers(e.o.Manifest) {
		if !ct.hasImage {
			continue
		}
		ref, err := reference.ParseNormalizedNamed(ct.image)
		if err != nil {
			if digest != LevelOff {
				e.add(RuleImageDigest, digest, ct.path, "container %s: image %q is not an image reference (%v)", ct.name, ct.image, err)
			}
			if registries != LevelOff {
				e.add(RuleImageRegistries, registries, ct.path, "container %s: image %q is not an image reference, so its registry is not known", ct.name, ct.image)
			}
			continue
		}
		if _, pinned := ref.(reference.Digested); !pinned && digest != LevelOff {
			e.add(RuleImageDigest, digest, ct.path, "container %s: image %s is not pinned by digest (name@sha256:…)", ct.name, ct.image)
		}
		if registries != LevelOff && !allowedRegistry(ref.Name(), e.c.Rules.ImageRegistries.Allowed) {
			e.add(RuleImageRegistries, registries, ct.path, "container %s: image %s comes from %s, which is not an allowed registry (%s)",
				ct.name, ct.image, reference.Domain(ref), strings.Join(e.c.Rules.ImageRegistries.Allowed, ", "))
		}
	}
}

// allowedRegistry matches an image's full name (docker.io/library/nginx) against
// registries and registry paths, at whole path components.
func allowedRegistry(name string, allowed []string) bool {
	for _, a := range allowed {
		if name == a || strings.HasPrefix(name, a+"/") {
			return true
		}
	}
	return false
}

func (e *objectEval) namespace() {
	rule := e.c.Rules.Namespaces
	if rule.Level == LevelOff {
		return
	}
	apiVersion, _ := e.o.Manifest["apiVersion"].(string)
	kind := manifestKind(e.o.Manifest)
	meta, _ := e.o.Manifest["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	path := pathOf("metadata", "namespace")
	switch {
	case apiVersion == "v1" && kind == "Namespace":
		ns, path = manifestName(e.o.Manifest), pathOf("metadata", "name")
	case render.ClusterScoped(apiVersion, kind):
		return
	case ns == "":
		ns = e.app.Namespace
	}
	if ns == "" {
		e.add(RuleNamespaces, rule.Level, path, "has no namespace and the Application names no destination namespace")
		return
	}
	if rule.allows(ns) {
		return
	}
	e.add(RuleNamespaces, rule.Level, path, "namespace %s is not an allowed namespace (%s)", ns, strings.Join(rule.Allowed, ", "))
}

func (e *objectEval) secret() {
	level := e.c.Rules.SecretValues.Level
	if level == LevelOff {
		return
	}
	e.plainSecretEnv(level)
	apiVersion, _ := e.o.Manifest["apiVersion"].(string)
	if apiVersion != "v1" || manifestKind(e.o.Manifest) != "Secret" {
		return
	}
	if e.o.GeneratedBy == "SecretGenerator" {
		e.add(RuleSecretValues, level, nil, "a secretGenerator makes this Secret from values committed in the repository")
		return
	}
	// Only the keys are named: their values are what must not be shown.
	for _, field := range []string{"data", "stringData"} {
		data, _ := e.o.Manifest[field].(map[string]any)
		if len(data) == 0 {
			continue
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		e.add(RuleSecretValues, level, pathOf(field), "Secret values are committed in the manifest (%s keys: %s); keep them out of Git (an external secret store or a sealed secret)",
			field, strings.Join(keys, ", "))
	}
}

// plainSecretEnv finds the env variables of secret-looking names, or holding a
// URL's password or a private key, whose value the manifest gives in plain
// text (render.PlainSecret): a value every view
// masks, so a reviewer approves it unseen, and that is in Git all the same.
func (e *objectEval) plainSecretEnv(level Level) {
	for _, ct := range containers(e.o.Manifest) {
		env, _ := ct.body["env"].([]any)
		for _, it := range env {
			m, _ := it.(map[string]any)
			name, _ := m["name"].(string)
			why, secret := render.PlainSecret(name, m["value"])
			if _, from := m["valueFrom"]; from || !secret {
				continue
			}
			at := append(append([]step(nil), ct.at...), key("env"), named(name), key("value"))
			e.add(RuleSecretValues, level, at, "container %s: env %s %s and its value is committed in plain text; keep it in a Secret and reference it with valueFrom.secretKeyRef",
				ct.name, name, why)
		}
	}
}

func (e *objectEval) deniedKind() {
	rule := e.c.Rules.DeniedKinds
	if rule.Level == LevelOff {
		return
	}
	apiVersion, _ := e.o.Manifest["apiVersion"].(string)
	group, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group = ""
	}
	kind := manifestKind(e.o.Manifest)
	for _, d := range rule.Kinds {
		if d.Kind != kind || d.Group != nil && *d.Group != group {
			continue
		}
		if d.RoleRef == "" {
			e.add(RuleDeniedKinds, rule.Level, pathOf("kind"), "kind %s is denied by the repository's policy", kind)
			return
		}
		ref, _ := e.o.Manifest["roleRef"].(map[string]any)
		if name, _ := ref["name"].(string); name == d.RoleRef {
			e.add(RuleDeniedKinds, rule.Level, pathOf("roleRef", "name"), "a %s to %s is denied by the repository's policy", kind, d.RoleRef)
			return
		}
	}
}

// describe names an object as the render check does: Kind namespace/name.
func describe(m map[string]any, destination string) string {
	apiVersion, _ := m["apiVersion"].(string)
	kind := manifestKind(m)
	meta, _ := m["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	if ns == "" && !render.ClusterScoped(apiVersion, kind) {
		ns = destination
	}
	if ns == "" {
		return kind + " " + manifestName(m)
	}
	return kind + " " + ns + "/" + manifestName(m)
}
