package render

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"maps"
	"slices"
)

// Object is one object of an Application's render, as Argo CD would apply it.
type Object struct {
	// Manifest is the rendered object, Secret values included: callers that render
	// to compare or to dry-run need the real object. It is therefore never part of
	// a serialised form of Object (json:"-"); EncodeObjects is the one deliberate
	// way to store it. Shared between callers: do not modify.
	Manifest map[string]any `json:"-"`
	// File and Doc locate the document (counted from 0) a Directory app's object
	// was read from.
	File string `json:"file,omitempty"`
	Doc  int    `json:"doc,omitempty"`
	// ListItem, when not 0, says the object is item ListItem (counted from 1) of
	// that document, a List: Argo CD deploys a List's items.
	ListItem int `json:"listItem,omitempty"`
	// Origin is the repository file a kustomize object was read from; GeneratedBy
	// names the generator kind when kustomize generated it; Remote is set when it
	// came from a remote base.
	Origin      string `json:"origin,omitempty"`
	GeneratedBy string `json:"generatedBy,omitempty"`
	Remote      bool   `json:"remote,omitempty"`
}

// Render renders one Application from the repository at repoDir exactly as Plan
// renders it before an edit (kustomize objects carry their origin). It is the
// render-only entry point: its output may be kept, for example by commit, and
// handed back to Plan through Request.BeforeRender. A *Refusal says why the app
// cannot be rendered; as Plan's, its text carries no secret value of the files
// the render read or of the app (a kustomize error may quote a literal), since
// callers show it to people: a check run, a repository view.
func Render(ctx context.Context, repoDir string, app Application) ([]Object, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	objs, err := render(ctx, repoDir, app)
	return objs, timedOut(ctx, err)
}

// render renders app from repoDir; an error's text is scrubbed of the secret
// values of the files the render read and of the app.
func render(ctx context.Context, repoDir string, app Application) ([]Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := cleanRel(app.Path); !ok {
		return nil, &Refusal{Code: CodePathEscape, App: app.Name, Reason: fmt.Sprintf("application %s: path %q leaves the repository", app.Name, app.Path)}
	}
	t, err := openTree(repoDir)
	if err != nil {
		return nil, err
	}
	objs, err := renderApp(ctx, newView(t, nil), app, true)
	if err != nil {
		return nil, newScrubber(t.secretValues([]Application{app})).err(timedOut(ctx, err))
	}
	return exportObjects(objs), nil
}

// SourceID identifies everything an Application's render depends on besides the
// repository tree: its format, path and source options (for a Helm app also the
// release name and namespace, which templates read). Applications with the same
// SourceID render the same objects from the same tree (otherwise the destination
// namespace is applied after rendering), so a render may be shared or cached under it.
func (a Application) SourceID() string { return sourceKey(a) }

func exportObjects(objs []*object) []Object {
	out := make([]Object, len(objs))
	for i, o := range objs {
		out[i] = Object{Manifest: o.body, File: o.file, Doc: o.doc, ListItem: o.item + 1, Origin: o.origin, GeneratedBy: o.generatedBy, Remote: o.remote}
	}
	return out
}

// importObjects turns objects given by a caller back into render's own form. The
// manifests are normalized (a decoder other than render's may have produced them)
// and must name apiVersion and kind.
func importObjects(app Application, objs []Object) ([]*object, error) {
	out := make([]*object, len(objs))
	for i, e := range objs {
		o, ok := newObject(e.Manifest)
		if !ok {
			return nil, fmt.Errorf("application %s: supplied before-render object %d has no apiVersion or kind", app.Name, i)
		}
		o.file, o.doc, o.item, o.origin, o.generatedBy, o.remote = e.File, e.Doc, e.ListItem-1, e.Origin, e.GeneratedBy, e.Remote
		out[i] = o
	}
	return out, nil
}

// encodedObject is the stored form of an Object.
type encodedObject struct {
	Manifest    encodedValue
	File        string
	Doc         int
	ListItem    int
	Origin      string
	GeneratedBy string
	Remote      bool
}

// encodedValue is one value of a manifest tree with its type spelled out: gob (like
// JSON) would turn an empty list into a missing one and cannot tell 1 from 1.0 once
// decoded, and a cached render must compare equal to a fresh one.
type encodedValue struct {
	Kind byte // one of the value kinds below
	S    string
	I    int64
	F    float64
	B    bool
	List []encodedValue
	Keys []string
	Vals []encodedValue
}

const (
	valueNull byte = iota
	valueString
	valueInt
	valueFloat
	valueBool
	valueList
	valueMap
)

func encodeValue(v any) (encodedValue, error) {
	switch x := v.(type) {
	case nil:
		return encodedValue{Kind: valueNull}, nil
	case string:
		return encodedValue{Kind: valueString, S: x}, nil
	case int64:
		return encodedValue{Kind: valueInt, I: x}, nil
	case float64:
		return encodedValue{Kind: valueFloat, F: x}, nil
	case bool:
		return encodedValue{Kind: valueBool, B: x}, nil
	case []any:
		out := encodedValue{Kind: valueList, List: make([]encodedValue, len(x))}
		for i, e := range x {
			var err error
			if out.List[i], err = encodeValue(e); err != nil {
				return encodedValue{}, err
			}
		}
		return out, nil
	case map[string]any:
		out := encodedValue{Kind: valueMap, Keys: slices.Sorted(maps.Keys(x)), Vals: make([]encodedValue, len(x))}
		for i, k := range out.Keys {
			var err error
			if out.Vals[i], err = encodeValue(x[k]); err != nil {
				return encodedValue{}, fmt.Errorf("%s: %w", k, err)
			}
		}
		return out, nil
	default:
		return encodedValue{}, fmt.Errorf("value of type %T is not part of a rendered manifest", v)
	}
}

func (e encodedValue) decode() (any, error) {
	switch e.Kind {
	case valueNull:
		return nil, nil
	case valueString:
		return e.S, nil
	case valueInt:
		return e.I, nil
	case valueFloat:
		return e.F, nil
	case valueBool:
		return e.B, nil
	case valueList:
		out := make([]any, len(e.List))
		for i, item := range e.List {
			var err error
			if out[i], err = item.decode(); err != nil {
				return nil, err
			}
		}
		return out, nil
	case valueMap:
		if len(e.Keys) != len(e.Vals) {
			return nil, fmt.Errorf("map with %d keys and %d values", len(e.Keys), len(e.Vals))
		}
		out := make(map[string]any, len(e.Keys))
		for i, k := range e.Keys {
			v, err := e.Vals[i].decode()
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unknown value kind %d", e.Kind)
	}
}

// EncodeObjects stores a render for a cache the service controls. The output holds
// Secret values in clear, like the repository tree it was rendered from, so it
// belongs beside that tree and never in a report or a log. Values keep their exact
// type and shape (an empty list stays empty, 1.0 stays a float), so a decoded render
// compares equal to a fresh one.
func EncodeObjects(objs []Object) ([]byte, error) {
	enc := make([]encodedObject, len(objs))
	for i, o := range objs {
		m, err := encodeValue(o.Manifest)
		if err != nil {
			return nil, fmt.Errorf("encode rendered object %d: %w", i, err)
		}
		enc[i] = encodedObject{Manifest: m, File: o.File, Doc: o.Doc, ListItem: o.ListItem, Origin: o.Origin, GeneratedBy: o.GeneratedBy, Remote: o.Remote}
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(enc); err != nil {
		return nil, fmt.Errorf("encode rendered objects: %w", err)
	}
	return b.Bytes(), nil
}

// DecodeObjects reads what EncodeObjects stored.
func DecodeObjects(data []byte) ([]Object, error) {
	var enc []encodedObject
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&enc); err != nil {
		return nil, fmt.Errorf("decode rendered objects: %w", err)
	}
	out := make([]Object, len(enc))
	for i, e := range enc {
		v, err := e.Manifest.decode()
		if err != nil {
			return nil, fmt.Errorf("decode rendered object %d: %w", i, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("decode rendered object %d: not a mapping", i)
		}
		out[i] = Object{Manifest: m, File: e.File, Doc: e.Doc, ListItem: e.ListItem, Origin: e.Origin, GeneratedBy: e.GeneratedBy, Remote: e.Remote}
	}
	return out, nil
}
