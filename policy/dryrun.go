package policy

import (
	"io/fs"
	"strconv"
	"strings"

	"github.com/kukie/kukie-gitops/render"
)

// Refusal is a changed object the destination cluster refused in a server-side
// dry-run.
type Refusal struct {
	// Object is the object as rendered, whose source the finding points at.
	Object render.Object
	// Fields are the field paths the API server names as the cause
	// ("spec.template.spec.containers[0].image"), in its order.
	Fields []string
	// Message is the API server's message, masked of Secret values.
	Message string
}

// DryRunFindings are the dry_run rule's findings for app's refused objects, each
// at the manifest line of the first field the API server names (or the nearest
// enclosing one the source spells; the object's document when it names none).
// fsys is the tree app was rendered from, as for Evaluate. Nothing when the rule
// is off.
func (c *Config) DryRunFindings(app App, fsys fs.FS, refused []Refusal) []Finding {
	level := c.Rules.DryRun.Level
	if level == LevelOff {
		return nil
	}
	src := newSources(fsys)
	var out []Finding
	for _, r := range refused {
		var path []step
		if len(r.Fields) > 0 {
			path = fieldSteps(r.Object.Manifest, r.Fields[0])
		}
		file, line := src.locate(r.Object, path)
		out = append(out, Finding{Rule: RuleDryRun, Level: level, App: app.Name, Object: describe(r.Object.Manifest, app.Namespace),
			Message: "the destination cluster refuses it in a server-side dry-run: " + r.Message, Path: file, Line: line})
	}
	return out
}

// fieldSteps reads an API server field path (spec.containers[0].image,
// metadata.labels[app.kubernetes.io/name]) as steps into manifest m: a list index
// becomes the item's name when it has one, since the source document may hold
// the items in another order than the render. The steps stop where the path
// leaves m or cannot be read.
func fieldSteps(m map[string]any, field string) []step {
	var out []step
	var v any = m
	rest := field
	for rest != "" {
		var tok string
		if strings.HasPrefix(rest, "[") {
			end := strings.Index(rest, "]")
			if end < 0 {
				return out
			}
			tok, rest = rest[1:end], rest[end+1:]
			if list, ok := v.([]any); ok {
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(list) {
					return out
				}
				v = list[i]
				if item, ok := v.(map[string]any); ok {
					if name, ok := item["name"].(string); ok {
						out = append(out, named(name))
						continue
					}
				}
				out = append(out, step{item: true, index: i, positional: true})
				continue
			}
		} else {
			rest = strings.TrimPrefix(rest, ".")
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			tok, rest = rest[:end], rest[end:]
		}
		obj, ok := v.(map[string]any)
		if !ok || tok == "" {
			return out
		}
		out = append(out, key(tok))
		v = obj[tok]
	}
	return out
}
