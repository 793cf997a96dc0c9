package render

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// errNotApplicable says an edit location cannot express the change; the next
// location is tried.
var errNotApplicable = errors.New("this location cannot express the change")

// declinedError is errNotApplicable for a location the user would expect the
// change in: w says why it was passed over, and the result of the candidate
// that verifies instead carries it.
type declinedError struct{ w Warning }

func (e *declinedError) Error() string { return errNotApplicable.Error() + ": " + e.w.Message }

func (e *declinedError) Unwrap() error { return errNotApplicable }

func notApplicable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNotApplicable, fmt.Sprintf(format, args...))
}

// opMode says what kind of document ops are made for.
type opMode int

const (
	// inPlace edits the resource's own manifest: values are computed from it.
	inPlace opMode = iota
	// inPatch edits a strategic-merge patch of the resource: values are the final
	// rendered ones, and missing items are created (the patch merges by name). An
	// env variable unset that the patch itself sets loses its entry, which is
	// right when nothing below the patch sets it.
	inPatch
	// inPatchDirective is inPatch whose unset of a variable the patch sets turns
	// that entry into a "$patch: delete" directive: for a variable the layers
	// below the patch set too, which dropping the entry would bring back.
	inPatchDirective
)

// scalar returns a YAML value for a string that must stay a string: quoted when a
// plain scalar would read back as a number, bool, null or something else.
func scalar(s string) any {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(s), &n); err != nil || len(n.Content) != 1 {
		return yamledit.Quoted(s)
	}
	c := n.Content[0]
	if c.Kind != yaml.ScalarNode || c.Tag != "!!str" || c.Style != 0 || c.Value != s {
		return yamledit.Quoted(s)
	}
	return s
}

func keys(ks ...string) yamledit.Path {
	p := make(yamledit.Path, 0, len(ks))
	for _, k := range ks {
		p = append(p, yamledit.K(k))
	}
	return p
}

func joinPath(parts ...yamledit.Path) yamledit.Path {
	var out yamledit.Path
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// changeOps returns the ops that make change c in doc, a manifest of the target (or a
// strategic-merge patch of it). rendered is the target's before-render, expected its
// expected after-render.
func changeOps(doc map[string]any, kind string, c Change, mode opMode, rendered, expected map[string]any) ([]yamledit.Op, error) {
	if c.Replicas != nil {
		return []yamledit.Op{{Path: keys("spec", "replicas"), Kind: yamledit.OpSet, Value: c.Replicas.Count}}, nil
	}
	if c.Patch != nil {
		return patchOps(doc, c.Patch)
	}
	name := c.containerName()
	rct, ok := findContainer(rendered, kind, name)
	if !ok {
		return nil, notApplicable("no container %s", name)
	}
	ect, _ := findContainer(expected, kind, name)
	dct, inDoc := findContainer(doc, kind, name)
	if !inDoc && mode == inPlace {
		return nil, notApplicable("container %s is not in this document", name)
	}
	list := rct.list
	if inDoc {
		list = dct.list
	}
	base := joinPath(keys(podSpecPath(kind)...), yamledit.Path{yamledit.K(list), yamledit.M("name", name)})

	switch {
	case c.Image != nil:
		value, _ := ect.body["image"].(string)
		if mode == inPlace {
			cur, _ := dct.body["image"].(string)
			if cur == "" {
				return nil, notApplicable("container %s has no image in this document", name)
			}
			value = c.Image.apply(parseImageRef(cur)).String()
		}
		return []yamledit.Op{{Path: joinPath(base, keys("image")), Kind: yamledit.OpSet, Value: scalar(value)}}, nil
	case c.Env != nil:
		return envOps(base, dct.body, rct.body, c.Env, mode)
	case c.Resources != nil:
		return resourceOps(base, dct.body, c.Resources, mode)
	}
	return nil, fmt.Errorf("unsupported change")
}

func envEntry(ct map[string]any, name string) (map[string]any, bool) {
	env, _ := ct["env"].([]any)
	for _, it := range env {
		m, _ := it.(map[string]any)
		if m["name"] == name {
			return m, true
		}
	}
	return nil, false
}

func envOps(base yamledit.Path, doc, rendered map[string]any, e *Env, mode opMode) ([]yamledit.Op, error) {
	envPath := joinPath(base, keys("env"))
	item := func(name string) yamledit.Path {
		return joinPath(envPath, yamledit.Path{yamledit.M("name", name)})
	}
	var ops []yamledit.Op
	if mode != inPatchDirective {
		remaining := len(envNames(doc))
		for _, name := range e.Unset {
			switch _, ok := envEntry(doc, name); {
			case ok:
				remaining--
			case mode == inPlace:
				return nil, notApplicable("environment variable %s is not set in this document", name)
			default:
				remaining++ // its "$patch: delete" entry
			}
		}
		for _, name := range slices.Sorted(maps.Keys(e.Set)) {
			if _, ok := envEntry(doc, name); !ok {
				remaining++
			}
		}
		if remaining == 0 {
			return []yamledit.Op{{Path: envPath, Kind: yamledit.OpDelete}}, nil
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.Set)) {
		cur, inDoc := envEntry(doc, name)
		switch {
		case inDoc && cur["valueFrom"] != nil:
			ops = append(ops, yamledit.Op{Path: joinPath(item(name), keys("valueFrom")), Kind: yamledit.OpDelete})
		case mode == inPatch:
			// A strategic-merge null removes a valueFrom that comes from below the patch.
			if r, ok := envEntry(rendered, name); ok && r["valueFrom"] != nil {
				ops = append(ops, yamledit.Op{Path: joinPath(item(name), keys("valueFrom")), Kind: yamledit.OpSet, Value: nil})
			}
		}
		if inDoc && cur["$patch"] != nil {
			ops = append(ops, yamledit.Op{Path: joinPath(item(name), keys("$patch")), Kind: yamledit.OpDelete})
		}
		ops = append(ops, yamledit.Op{Path: joinPath(item(name), keys("value")), Kind: yamledit.OpSet, Value: scalar(e.Set[name])})
	}
	for _, name := range e.Unset {
		cur, inDoc := envEntry(doc, name)
		if inDoc && mode != inPatchDirective {
			ops = append(ops, yamledit.Op{Path: item(name), Kind: yamledit.OpDelete})
			continue
		}
		// A directive entry carries the name alone: a value beside it would
		// say what the variable no longer is.
		for _, k := range []string{"value", "valueFrom"} {
			if _, ok := cur[k]; ok {
				ops = append(ops, yamledit.Op{Path: joinPath(item(name), keys(k)), Kind: yamledit.OpDelete})
			}
		}
		ops = append(ops, yamledit.Op{Path: joinPath(item(name), keys("$patch")), Kind: yamledit.OpSet, Value: "delete"})
	}
	return ops, nil
}

// unsetsOwnEnv reports whether env change e unsets a variable container name
// of doc, a strategic-merge patch of a kind object, sets: one the patch both
// adds and, for the layers below it, may have to delete.
func unsetsOwnEnv(doc map[string]any, kind, name string, e *Env) bool {
	ct, ok := findContainer(doc, kind, name)
	if !ok || e == nil {
		return false
	}
	for _, n := range e.Unset {
		if _, ok := envEntry(ct.body, n); ok {
			return true
		}
	}
	return false
}

func resourceOps(base yamledit.Path, doc map[string]any, r *Resources, mode opMode) ([]yamledit.Op, error) {
	res, _ := doc["resources"].(map[string]any)
	var ops []yamledit.Op
	sectionsLeft := len(res)
	var sectionOps []yamledit.Op
	for _, section := range []string{"requests", "limits"} {
		changes := r.Requests
		if section == "limits" {
			changes = r.Limits
		}
		if len(changes) == 0 {
			continue
		}
		cur, _ := res[section].(map[string]any)
		left := len(cur)
		var these []yamledit.Op
		for _, name := range slices.Sorted(maps.Keys(changes)) {
			q := changes[name]
			p := joinPath(base, keys("resources", section, name))
			_, present := cur[name]
			switch {
			case q != "":
				if !present {
					left++
				}
				these = append(these, yamledit.Op{Path: p, Kind: yamledit.OpSet, Value: scalar(q)})
			case present:
				left--
				these = append(these, yamledit.Op{Path: p, Kind: yamledit.OpDelete})
			case mode == inPatch:
				// A strategic-merge null removes a quantity set below the patch.
				these = append(these, yamledit.Op{Path: p, Kind: yamledit.OpSet, Value: nil})
			}
		}
		if left == 0 && len(cur) > 0 {
			// Removing the last quantity removes the section, as Kubernetes reads it.
			sectionsLeft--
			these = []yamledit.Op{{Path: joinPath(base, keys("resources", section)), Kind: yamledit.OpDelete}}
		} else if len(cur) == 0 && left > 0 {
			sectionsLeft++
		}
		sectionOps = append(sectionOps, these...)
	}
	if sectionsLeft == 0 && len(res) > 0 {
		return []yamledit.Op{{Path: joinPath(base, keys("resources")), Kind: yamledit.OpDelete}}, nil
	}
	ops = append(ops, sectionOps...)
	if len(ops) == 0 {
		return nil, notApplicable("nothing to change in this document")
	}
	return ops, nil
}

// setsField reports whether a patch document already sets the field the change is
// about, which makes it the first place to edit.
func setsField(doc map[string]any, kind string, c Change) bool {
	if c.Replicas != nil {
		_, ok := getPath(doc, []string{"spec", "replicas"})
		return ok
	}
	ct, ok := findContainer(doc, kind, c.containerName())
	if !ok {
		return false
	}
	switch {
	case c.Image != nil:
		_, ok := ct.body["image"]
		return ok
	case c.Env != nil:
		_, ok := ct.body["env"]
		return ok
	case c.Resources != nil:
		_, ok := ct.body["resources"]
		return ok
	}
	return false
}
