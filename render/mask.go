package render

import (
	"encoding/base64"
	"regexp"
	"strings"
)

// Masking happens here and in maskfile.go, and nowhere else: every text render
// returns (git diff, cluster diff, field changes, differences in refusals) is built
// from masked input, so no caller has to mask again and no output can forget to.
// Objects are masked by structure; files by line, from their parse (maskfile.go).

// redacted replaces every secret value render would otherwise show. Keys stay, so
// a reader still sees what is there and where a change is.
const redacted = "[redacted]"

// secretLookingName matches the names of keys and environment variables whose
// values are treated as secrets: ConfigMap keys, generator literals and env file
// entries, container env entries. A bare "key" counts only as a word of its own
// (tls.key, SIGNING_KEY, privateKey), not inside another word (MONKEY_MODE).
var secretLookingName = regexp.MustCompile(`(?i)(passw(or)?d|pwd|secret|token|credential|auth|` +
	`api[-_.]?key|private[-_.]?key|access[-_.]?key|dsn|connection[-_.]?string|` +
	`(^|[^a-z])key([^a-z]|$)|(?-i:[a-z]Key)$)`)

// looksSecret reports whether a key or variable name suggests a secret value.
func looksSecret(name string) bool {
	return secretLookingName.MatchString(name)
}

const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// isSensitivePath reports whether the value at path (from the object root) of an
// object of this group and kind must never be shown. Path segments are map keys and
// list item labels as the comparer writes them ("[name=X]", "[0]").
func isSensitivePath(group, kind string, path []string) bool {
	if len(path) == 0 {
		return false
	}
	// An env entry (or any named item) whose name looks secret: its value.
	if n := len(path); n >= 2 && path[n-1] == "value" {
		if name, ok := strings.CutPrefix(path[n-2], "[name="); ok && looksSecret(strings.TrimSuffix(name, "]")) {
			return true
		}
	}
	// The last-applied annotation is a copy of the whole object, secrets included.
	if len(path) >= 3 && path[0] == "metadata" && path[1] == "annotations" && path[2] == lastAppliedAnnotation {
		return true
	}
	if group != "" {
		return false
	}
	switch kind {
	case "Secret":
		return path[0] == "data" || path[0] == "stringData"
	case "ConfigMap":
		return len(path) >= 2 && (path[0] == "data" || path[0] == "binaryData") && looksSecret(path[1])
	}
	return false
}

// maskBody returns a copy of an object's body with every sensitive value replaced.
func maskBody(group, kind string, body map[string]any) map[string]any {
	if body == nil {
		return nil
	}
	return maskValueAt(group, kind, nil, body).(map[string]any)
}

// maskValueAt returns a copy of v, found at path in an object of group and kind,
// with every sensitive value in it replaced. A sensitive map keeps its keys.
func maskValueAt(group, kind string, path []string, v any) any {
	if isAbsent(v) || v == nil {
		return v
	}
	sensitive := isSensitivePath(group, kind, path)
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		// A map that names itself like a secret holds its value in "value", wherever
		// it sits (an env entry outside a named list, a patch's value).
		named, _ := x["name"].(string)
		for k, cv := range x {
			switch {
			case sensitive:
				out[k] = redacted
			case k == "value" && looksSecret(named):
				out[k] = redacted
			default:
				out[k] = maskValueAt(group, kind, childPath(path, k), cv)
			}
		}
		return out
	case []any:
		if sensitive {
			return redacted
		}
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = maskValueAt(group, kind, childPath(path, itemLabel(it, i)), it)
		}
		return out
	}
	if sensitive {
		return redacted
	}
	return v
}

// childPath appends without sharing the parent's backing array between siblings.
func childPath(path []string, seg string) []string {
	return append(path[:len(path):len(path)], seg)
}

// MaskText replaces in text every secret value of objects (as isSensitivePath and
// the secret-named "value" rule find them, base64 forms included): for words from
// elsewhere about those objects, such as a cluster's refusal of a dry-run, where an
// admission policy may quote an env value.
func MaskText(objects []ChangedObject, text string) string {
	var values []string
	for _, o := range objects {
		apiVersion, _ := o.Object["apiVersion"].(string)
		kind, _ := o.Object["kind"].(string)
		collectSensitive(groupOf(apiVersion), kind, nil, o.Object, false, &values)
	}
	return newScrubber(values).text(text)
}

// collectSensitive appends the scalar values under v that maskValueAt would mask.
func collectSensitive(group, kind string, path []string, v any, sensitive bool, out *[]string) {
	sensitive = sensitive || isSensitivePath(group, kind, path)
	switch x := v.(type) {
	case map[string]any:
		named, _ := x["name"].(string)
		for k, cv := range x {
			collectSensitive(group, kind, childPath(path, k), cv, sensitive || (k == "value" && looksSecret(named)), out)
		}
	case []any:
		for i, it := range x {
			collectSensitive(group, kind, childPath(path, itemLabel(it, i)), it, sensitive, out)
		}
	case string:
		if sensitive {
			*out = append(*out, x)
			if group == "" && kind == "Secret" && len(path) > 0 && path[0] == "data" {
				if raw, err := base64.StdEncoding.DecodeString(x); err == nil {
					*out = append(*out, string(raw))
				}
			}
		}
	}
}
