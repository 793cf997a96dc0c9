package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kukie/kukie-gitops/objref"
)

// Every view of a secret-looking value masks it (see isSensitivePath), so a
// reviewer would approve an edit committing one without seeing it. A verified
// edit whose after-render gives such a value a plain value it did not have is
// therefore refused. The after-render is read, not the request, so every way
// of writing one is caught: an env change, a patch, a Helm values key the chart
// renders into the variable, a kustomize patch or a generator's literal or env
// file line. A value the before-render already holds is the repository's own:
// it does not block a change that leaves it as it is.

// PlainSecretValue reports whether value, the plain value of a container's env
// variable or a ConfigMap's data key named name, looks like a secret written in
// clear: the name looks like a secret's (as masking judges it) and the value is
// neither empty nor a flag ("true", "false"), which a name such as REDIS_AUTH
// holds without being a secret; or, whatever the name, the value holds a
// secret by what it is (a URL's password, a private key), which every view
// masks as well (DATABASE_URL=postgres://app:pw@db/app).
func PlainSecretValue(name string, value any) bool {
	_, ok := PlainSecret(name, value)
	return ok
}

// PlainSecret is PlainSecretValue, with what makes the value a secret, for a
// reason to say: "looks like a secret" (its name) or "holds a secret (a URL's
// password or a private key)" (its content). It never says the value.
func PlainSecret(name string, value any) (string, bool) {
	text, ok := plainText(value)
	if !ok {
		return "", false
	}
	if looksSecret(name) {
		switch strings.ToLower(strings.TrimSpace(text)) {
		case "", "true", "false":
		default:
			return "looks like a secret", true
		}
	}
	if len(secretTexts(text)) > 0 {
		return "holds a secret (a URL's password or a private key)", true
	}
	return "", false
}

// plainText is a scalar value as the container reads it; ok is false for none
// (a null, a mapping, a list).
func plainText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int64, int, float64, uint64:
		return fmt.Sprint(x), true
	}
	return "", false
}

// plainSecret is one secret-looking value an object holds in clear.
type plainSecret struct {
	// field names it for a reason: "env DB_PASSWORD of container web".
	field string
	// why says what makes it a secret: "looks like a secret".
	why string
	// value is compared, never shown.
	value string
}

// plainSecretsOf lists, by the path of each, the secret-looking values o holds
// in clear: the env entries of every container of every pod template it embeds
// (a workload's, a CronJob's job template's, a custom kind's), and for a
// ConfigMap its data keys.
func plainSecretsOf(o *object) map[string]plainSecret {
	out := map[string]plainSecret{}
	if o.kind == "ConfigMap" && groupOf(o.apiVersion) == "" {
		data, _ := o.body["data"].(map[string]any)
		for k, v := range data {
			if why, ok := PlainSecret(k, v); ok {
				text, _ := plainText(v)
				out["data\x00"+k] = plainSecret{field: "data key " + k, why: why, value: text}
			}
		}
	}
	lists := map[string]string{"containers": "container", "initContainers": "init container", "ephemeralContainers": "ephemeral container"}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			for k, cv := range x {
				noun, isList := lists[k]
				if list, ok := cv.([]any); ok && isList {
					for _, it := range list {
						c, _ := it.(map[string]any)
						name, _ := c["name"].(string)
						for _, e := range items(c, "env") {
							env, _ := e["name"].(string)
							why, secret := PlainSecret(env, e["value"])
							if _, from := e["valueFrom"]; from || !secret {
								continue
							}
							text, _ := plainText(e["value"])
							id := at + "\x00" + k + "\x00" + name + "\x00" + env
							out[id] = plainSecret{field: fmt.Sprintf("env %s of %s %s", env, noun, name), why: why, value: text}
						}
					}
					continue
				}
				walk(cv, at+"\x00"+k)
			}
		case []any:
			for i, it := range x {
				walk(it, at+"\x00"+strconv.Itoa(i))
			}
		}
	}
	walk(o.body, "")
	return out
}

// plainSecretsWritten is the reason an edit whose renders changed as changes
// say must not be made, "" when it may: the values it gives secret-looking
// names in clear that the before-render does not hold there. An object the
// edit renames (a generated ConfigMap's new hashed name) is compared with the
// objects of its kind and namespace the edit removes from its app's render.
func plainSecretsWritten(changes []changedObject) string {
	var found []string
	for _, c := range changes {
		if c.after == nil {
			continue
		}
		after := plainSecretsOf(c.after)
		if len(after) == 0 {
			continue
		}
		held := map[string]map[string]bool{}
		note := func(o *object) {
			for id, s := range plainSecretsOf(o) {
				if held[id] == nil {
					held[id] = map[string]bool{}
				}
				held[id][s.value] = true
			}
		}
		if c.before != nil {
			note(c.before)
		} else {
			for _, r := range changes {
				if r.app == c.app && r.after == nil && r.key.Group == c.key.Group && r.key.Kind == c.key.Kind && r.key.Namespace == c.key.Namespace {
					note(r.before)
				}
			}
		}
		ids := make([]string, 0, len(after))
		for id := range after {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		obj := objref.Target{APIVersion: c.after.apiVersion, Kind: c.after.kind, Namespace: c.key.Namespace, Name: c.key.Name}
		for _, id := range ids {
			s := after[id]
			if held[id][s.value] {
				continue
			}
			found = append(found, fmt.Sprintf("%s of %s %s: its value would be committed to Git in plain text; %s", s.field, obj, s.why, plainSecretWayOut(c.after)))
		}
	}
	if len(found) > maxReportedDifferences {
		found = append(found[:maxReportedDifferences], fmt.Sprintf("and %d more", len(found)-maxReportedDifferences))
	}
	return strings.Join(found, "; ")
}

// plainSecretWayOut says where the value of o's secret-looking field belongs.
func plainSecretWayOut(o *object) string {
	if o.kind == "ConfigMap" && groupOf(o.apiVersion) == "" {
		return "keep it in a Secret, kept in your secret store, and have the containers read it from there (valueFrom.secretKeyRef or envFrom.secretRef; a patch change of the workload can set that)"
	}
	return "keep it in a Secret and reference it with valueFrom.secretKeyRef (a patch change can set that)"
}

// secretValues are the values of c that a view of it masks: an env value of a
// secret-looking name but a flag's, the values of a patch at the paths a diff
// of the target masks, and a new resource's secret values; with the secrets
// any value holds by what it is (a URL's password, a private key).
func (c Change) secretValues(target objref.Target) []string {
	var out []string
	switch {
	case c.Env != nil:
		for name, v := range c.Env.Set {
			if PlainSecretValue(name, v) {
				out = append(out, v)
			}
			out = append(out, secretTexts(v)...)
		}
	case c.Patch != nil:
		if doc, err := c.Patch.document(); err == nil {
			collectSensitive(groupOf(target.APIVersion), target.Kind, nil, doc, false, nil, &out)
		}
	case c.NewResource != nil:
		docs, err := splitManifest(c.NewResource.Manifest)
		if err != nil {
			break
		}
		for _, d := range docs {
			collectSensitive(groupOf(d.obj.apiVersion), d.obj.kind, nil, d.obj.body, false, nil, &out)
		}
	}
	return out
}
