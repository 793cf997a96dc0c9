package render

import (
	"bytes"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// redacted replaces every secret value render would otherwise show.
const redacted = "[redacted]"

// secretLookingKey matches ConfigMap keys whose values are treated as secrets.
var secretLookingKey = regexp.MustCompile(`(?i)(password|passwd|token|secret|key|credential)`)

const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// isSensitivePath reports whether the value at path (from the object root) of an
// object of this group and kind must never be shown.
func isSensitivePath(group, kind string, path []string) bool {
	if group != "" || len(path) == 0 {
		return false
	}
	switch kind {
	case "Secret":
		if path[0] == "data" || path[0] == "stringData" {
			return true
		}
		return len(path) >= 3 && path[0] == "metadata" && path[1] == "annotations" && path[2] == lastAppliedAnnotation
	case "ConfigMap":
		return len(path) >= 2 && (path[0] == "data" || path[0] == "binaryData") && secretLookingKey.MatchString(path[1])
	}
	return false
}

// maskBody returns a copy of an object's body with every sensitive value replaced.
func maskBody(group, kind string, body map[string]any) map[string]any {
	out := deepCopy(body).(map[string]any)
	if group != "" || (kind != "Secret" && kind != "ConfigMap") {
		return out
	}
	for _, section := range []string{"data", "stringData", "binaryData"} {
		m, ok := out[section].(map[string]any)
		if !ok {
			if _, present := out[section]; present && kind == "Secret" {
				out[section] = redacted
			}
			continue
		}
		for k := range m {
			if isSensitivePath(group, kind, []string{section, k}) {
				m[k] = redacted
			}
		}
	}
	if kind == "Secret" {
		if ann, ok := getPath(out, []string{"metadata", "annotations"}); ok {
			if m, ok := ann.(map[string]any); ok {
				if _, ok := m[lastAppliedAnnotation]; ok {
					m[lastAppliedAnnotation] = redacted
				}
			}
		}
	}
	return out
}

// maskFileLines splits a manifest file into lines (each keeping its line ending) and
// replaces the values of Secret data and of secret-looking ConfigMap keys. Keys stay
// visible so a reader still sees where the change is.
func maskFileLines(data []byte) []string {
	lines := splitLines(data)
	for _, r := range sensitiveRanges(data, len(lines)) {
		for i := r.from; i <= r.to && i <= len(lines); i++ {
			if strings.HasPrefix(lines[i-1], "---") || strings.HasPrefix(lines[i-1], "...") {
				continue
			}
			lines[i-1] = redactLine(lines[i-1])
		}
	}
	return lines
}

// splitLines splits after each "\n"; a final line without one is kept as is.
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	parts := strings.SplitAfter(string(data), "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

var keyPrefix = regexp.MustCompile(`^(\s*(?:-\s+)?(?:"[^"]*"|'[^']*'|[^\s:#][^:#]*?)\s*:)`)

func redactLine(line string) string {
	body, ending := line, ""
	if strings.HasSuffix(body, "\r\n") {
		body, ending = body[:len(body)-2], "\r\n"
	} else if strings.HasSuffix(body, "\n") {
		body, ending = body[:len(body)-1], "\n"
	}
	if strings.TrimSpace(body) == "" {
		return line
	}
	if m := keyPrefix.FindString(body); m != "" {
		return m + " " + redacted + ending
	}
	indent := body[:len(body)-len(strings.TrimLeft(body, " \t"))]
	return indent + redacted + ending
}

type lineRange struct{ from, to int }

// sensitiveRanges finds the 1-based line ranges holding secret values. A file that
// does not parse is masked whole when it mentions a Secret, since its structure is
// unknown.
func sensitiveRanges(data []byte, lineCount int) []lineRange {
	if !bytes.Contains(data, []byte("Secret")) && !bytes.Contains(data, []byte("ConfigMap")) {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			if bytes.Contains(data, []byte("Secret")) {
				return []lineRange{{1, lineCount}}
			}
			return nil
		}
		docs = append(docs, &n)
	}
	var out []lineRange
	for i, doc := range docs {
		end := lineCount
		if i+1 < len(docs) {
			end = docStartLine(docs[i+1]) - 1
		}
		root := doc
		if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
			root = root.Content[0]
		}
		if root.Kind != yaml.MappingNode {
			continue
		}
		kind, apiVersion := scalarField(root, "kind"), scalarField(root, "apiVersion")
		if strings.Contains(apiVersion, "/") || (kind != "Secret" && kind != "ConfigMap") {
			continue
		}
		for j := 0; j+1 < len(root.Content); j += 2 {
			key, val := root.Content[j], root.Content[j+1]
			sectionEnd := end
			if j+2 < len(root.Content) {
				sectionEnd = root.Content[j+2].Line - 1
			}
			switch {
			case kind == "Secret" && (key.Value == "data" || key.Value == "stringData"):
				out = append(out, lineRange{val.Line, sectionEnd})
			case kind == "Secret" && key.Value == "metadata":
				out = append(out, annotationRange(val, sectionEnd)...)
			case kind == "ConfigMap" && (key.Value == "data" || key.Value == "binaryData") && val.Kind == yaml.MappingNode:
				for k := 0; k+1 < len(val.Content); k += 2 {
					if !secretLookingKey.MatchString(val.Content[k].Value) {
						continue
					}
					to := sectionEnd
					if k+2 < len(val.Content) {
						to = val.Content[k+2].Line - 1
					}
					out = append(out, lineRange{val.Content[k].Line, to})
				}
			}
		}
	}
	return out
}

func annotationRange(meta *yaml.Node, end int) []lineRange {
	if meta.Kind != yaml.MappingNode {
		return nil
	}
	for j := 0; j+1 < len(meta.Content); j += 2 {
		if meta.Content[j].Value != "annotations" || meta.Content[j+1].Kind != yaml.MappingNode {
			continue
		}
		ann := meta.Content[j+1]
		for k := 0; k+1 < len(ann.Content); k += 2 {
			if ann.Content[k].Value == lastAppliedAnnotation {
				to := end
				if k+2 < len(ann.Content) {
					to = ann.Content[k+2].Line - 1
				} else if j+2 < len(meta.Content) {
					to = meta.Content[j+2].Line - 1
				}
				return []lineRange{{ann.Content[k].Line, to}}
			}
		}
	}
	return nil
}

func docStartLine(doc *yaml.Node) int {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		return doc.Content[0].Line
	}
	return doc.Line
}

func scalarField(m *yaml.Node, key string) string {
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key && m.Content[j+1].Kind == yaml.ScalarNode {
			return m.Content[j+1].Value
		}
	}
	return ""
}
