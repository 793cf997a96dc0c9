package render

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Helm drops a key that a values file sets to null only from the defaults of
// the chart that reads it (coalesceValues): a subchart's values given by its
// parent (the parent's values.yaml, or any values file) are merged with the
// null kept, so "TIMEOUT: null" under a subchart's env in a later file renders
// as a variable with a null value, not as none. An env variable a subchart
// ranges over, set by a values file other apps read too, can then be removed
// for one app only by moving it out of the shared file, which the plan never
// edits for one app; the refusal says so instead of listing the renders alone.

// subchartNullNote says, for an env change of a Helm app that removes a
// variable set under a subchart's key of a shared values file (and not among
// the subchart's own defaults), why null does not remove it and what a person
// can do; "" for any other change.
func (p *planner) subchartNullNote() string {
	e := p.req.Change.Env
	if e == nil || len(e.Unset) == 0 || p.primary.SourceType != SourceHelm {
		return ""
	}
	editable, defaults, err := p.helmEditableFiles()
	if err != nil || len(editable) == 0 {
		return ""
	}
	subKeys := p.subchartKeysOfApp()
	if len(subKeys) == 0 {
		return ""
	}
	subDefaults, err := p.subchartDefaultLeaves(path.Dir(defaults))
	if err != nil {
		return ""
	}
	ownDefault := func(key string) bool {
		return slices.ContainsFunc(subDefaults, func(l valuesLeaf) bool { return l.path.String() == key })
	}
	for _, f := range editable {
		if !p.sharedValuesFile(f, defaults) {
			continue
		}
		data, err := p.before.read(f)
		if err != nil {
			continue
		}
		leaves, _ := valuesLeaves(f, data)
		for _, l := range leaves {
			if len(l.path) < 3 || !keysOnly(l.path) || !slices.Contains(subKeys, l.path[0].Key) {
				continue
			}
			name := l.path[len(l.path)-1].Key
			// Only a key of a mapping of variables (env, extraEnv, envVars):
			// an api.config.TIMEOUT of the same name is no variable removed.
			if !strings.Contains(strings.ToLower(l.path[len(l.path)-2].Key), "env") {
				continue
			}
			if !slices.Contains(e.Unset, name) || ownDefault(l.path.String()) {
				continue
			}
			return fmt.Sprintf("%s is set by %s at %s, a key of subchart %s: Helm removes a key set to null in a later values file only from the defaults of the chart that reads it, and to subchart %s that key is a value its parent gives, so null renders %s with a null value instead of removing it; %s is shared, and no edit of it is made for one application: to remove %s from %s alone, move %s out of %s into the values files of the applications that keep it (%s)",
				name, f, l.path, l.path[0].Key, l.path[0].Key, name, f, name, p.primary.Name, l.path, f, p.keepersOf(f))
		}
	}
	return ""
}

// subchartKeysOfApp are the keys the primary app's chart gives the subcharts
// it vendors, in its values.
func (p *planner) subchartKeysOfApp() []string {
	ch, err := p.appChart()
	if err != nil || ch == nil {
		return nil
	}
	keys := subchartKeys(ch.Metadata.Dependencies)
	var out []string
	for _, sub := range ch.Dependencies() {
		out = append(out, keys(sub.Name())...)
	}
	return out
}

// keepersOf names the other Helm apps that read file, each with its last
// values file: where the key goes for the apps that keep it.
func (p *planner) keepersOf(file string) string {
	var out []string
	key := p.t.key(file)
	for _, app := range p.apps {
		if app.Name == p.primary.Name || app.SourceType != SourceHelm || !p.reaches(app, key) {
			continue
		}
		where := app.Name
		if root, ok := cleanRel(app.Path); ok {
			if files, err := helmValueFiles(p.before, app, root); err == nil && len(files) > 0 && files[len(files)-1] != file {
				where += " in " + files[len(files)-1]
			}
		}
		out = append(out, where)
	}
	if len(out) == 0 {
		return "every other release of the chart"
	}
	return strings.Join(out, ", ")
}
