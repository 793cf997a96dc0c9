package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render/yamledit"
)

// maxPatchBytes bounds a patch change's JSON: it is request input, and a plan
// walks it several times.
const maxPatchBytes = 64 << 10

// Patch changes any fields of the target as a JSON merge patch (RFC 7386) does:
// the members of an object merge into the object, null removes a field, any other
// value (a list included) replaces it. Exactly one of Merge and Set is given.
type Patch struct {
	// Merge is the merge patch, a JSON object. (Integers beyond 2^53 lose
	// precision, as in any JSON object decoded to Go values.)
	Merge map[string]any `json:"merge,omitempty"`
	// Set lists fields by JSON pointer (RFC 6901, "/spec/rules", "~1" for "/" in
	// a key), each with its new value (null removes it): the merge patch that
	// holds exactly those fields. A pointer names object members only, since a
	// merge patch replaces lists whole (one through a list of the target is
	// refused, see checkPatchLists).
	Set []FieldValue `json:"set,omitempty"`
}

// FieldValue is one field of a Patch's Set. Value must be given: null removes the
// field, an absent value is an error rather than a removal.
type FieldValue struct {
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// UnmarshalJSON refuses a field without a value, which would read as null, and a
// key beside path and value (a misspelt one would be dropped): a decoder that
// refuses unknown fields does not reach into a type's own decoding.
func (f *FieldValue) UnmarshalJSON(data []byte) error {
	var raw struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	if len(raw.Value) == 0 {
		return fmt.Errorf("patch field %q has no value (null removes it)", raw.Path)
	}
	var v any
	if err := json.Unmarshal(raw.Value, &v); err != nil {
		return err
	}
	f.Path, f.Value = raw.Path, v
	return nil
}

// protectedFields are the fields a patch must not touch: the identity of the
// object (changing it is a delete and an add) and what the cluster writes.
var protectedFields = [][]string{
	{"apiVersion"}, {"kind"}, {"metadata", "name"}, {"metadata", "namespace"},
	{"metadata", "generateName"}, {"metadata", "uid"}, {"metadata", "resourceVersion"},
	{"metadata", "generation"}, {"metadata", "creationTimestamp"}, {"metadata", "managedFields"},
	{"status"},
}

// document returns the merge patch as a decoded JSON object, numbers that are
// integers as int64 (the type rendered manifests carry).
func (p *Patch) document() (map[string]any, error) {
	switch {
	case len(p.Merge) > 0 && len(p.Set) > 0:
		return nil, fmt.Errorf("a patch gives merge or set, not both")
	case len(p.Merge) > 0:
		v, err := normalizeJSON(p.Merge)
		if err != nil {
			return nil, fmt.Errorf("merge patch: %w", err)
		}
		return v.(map[string]any), nil
	case len(p.Set) > 0:
		doc := map[string]any{}
		size := 0
		for _, f := range p.Set {
			size += len(f.Path)
			if size > maxPatchBytes {
				return nil, fmt.Errorf("the patch is larger than %d bytes", maxPatchBytes)
			}
			segs, err := pointerSegments(f.Path)
			if err != nil {
				return nil, err
			}
			v, err := normalizeJSON(f.Value)
			if err != nil {
				return nil, fmt.Errorf("value of %s: %w", f.Path, err)
			}
			if size += approxSize(v); size > maxPatchBytes {
				return nil, fmt.Errorf("the patch is larger than %d bytes", maxPatchBytes)
			}
			cur := doc
			for i, s := range segs[:len(segs)-1] {
				next, ok := cur[s].(map[string]any)
				if !ok {
					if _, taken := cur[s]; taken {
						return nil, fmt.Errorf("field %s lies inside /%s, which the patch already sets", f.Path, strings.Join(segs[:i+1], "/"))
					}
					next = map[string]any{}
					cur[s] = next
				}
				cur = next
			}
			last := segs[len(segs)-1]
			if _, taken := cur[last]; taken {
				return nil, fmt.Errorf("field %s is given twice, or inside another field of the patch", f.Path)
			}
			cur[last] = v
		}
		return doc, nil
	}
	return nil, fmt.Errorf("a patch needs merge (a JSON merge patch) or set (fields by path)")
}

// pointerSegments splits a JSON pointer into its unescaped keys.
func pointerSegments(ptr string) ([]string, error) {
	if !strings.HasPrefix(ptr, "/") || ptr == "/" {
		return nil, fmt.Errorf("field path %q is not a JSON pointer to a field (\"/spec/replicas\")", ptr)
	}
	segs := strings.Split(ptr[1:], "/")
	for i, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("field path %q has an empty key", ptr)
		}
		if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(s), "~") {
			return nil, fmt.Errorf("field path %q: %q is not a valid escape (~0 or ~1)", ptr, s)
		}
		segs[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
	}
	return segs, nil
}

func escapePointer(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// normalizeJSON re-reads a decoded JSON value (or one written in YAML) the way
// decodeJSONValue reads it, bounded by maxPatchBytes; a value JSON cannot hold is
// an error.
func normalizeJSON(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(data) > maxPatchBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxPatchBytes)
	}
	return decodeJSONValue(data)
}

// decodeJSONValue decodes one JSON value, integers as int64 and other numbers as
// float64, and refuses trailing data.
func decodeJSONValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return fromJSONNumbers(v)
}

func fromJSONNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %s is out of range", x)
		}
		return f, nil
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			c, err := fromJSONNumbers(x[k])
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
	case []any:
		for i, e := range x {
			c, err := fromJSONNumbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
	}
	return v, nil
}

// Validate checks the patch on its own, before any repository is read: it
// decodes, changes something, and leaves the object's identity and status alone.
func (p *Patch) Validate() error {
	doc, err := p.document()
	if err != nil {
		return err
	}
	if len(doc) == 0 {
		return fmt.Errorf("the patch changes no field")
	}
	for _, f := range protectedFields {
		if _, ok := getPath(doc, f); ok {
			return fmt.Errorf("the patch sets /%s; a patch changes fields, never the object's identity or status", strings.Join(f, "/"))
		}
	}
	return checkLabelsAndAnnotations(nil, doc)
}

// checkLabelsAndAnnotations refuses, wherever the patch sets labels or
// annotations (metadata.labels of the object, of a pod template, ...), a key
// Kubernetes does not take there or a label value it does not take: the API server
// would refuse the object, which the edit would only find after reading and
// rendering the repository.
func checkLabelsAndAnnotations(at []string, m map[string]any) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		here := append(slices.Clone(at), k)
		sub, ok := m[k].(map[string]any)
		if !ok {
			continue
		}
		n := len(here)
		if n < 2 || here[n-2] != "metadata" || (k != "labels" && k != "annotations") {
			if err := checkLabelsAndAnnotations(here, sub); err != nil {
				return err
			}
			continue
		}
		ptr := "/" + strings.Join(escapeAll(here), "/")
		for _, key := range slices.Sorted(maps.Keys(sub)) {
			if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
				return fmt.Errorf("%s: %s is not a valid %s key: %s", ptr, strconv.Quote(key), strings.TrimSuffix(k, "s"), strings.Join(msgs, "; "))
			}
			switch v := sub[key].(type) {
			case nil:
				// null removes the label or annotation.
			case string:
				if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 && k == "labels" {
					return fmt.Errorf("%s/%s: %s is not a valid label value: %s", ptr, escapePointer(key), strconv.Quote(v), strings.Join(msgs, "; "))
				}
			default:
				// Refused here, with the request, rather than once the target
				// is read and rendered (checkStringValue, which still guards a
				// patch that reaches a render another way).
				return notAString(ptr+"/"+escapePointer(key), v)
			}
		}
	}
	return nil
}

// stringsOnlyData are the top-level fields whose members hold strings alone in an
// object of apiVersion and kind, as far as the kind says before the object is
// read: a ConfigMap's data and binaryData (base64, a string too). A Secret's are
// left out: a Secret is never edited, and is refused whole once found, with none
// of the values asked for quoted back.
func stringsOnlyData(apiVersion, kind string) []string {
	if groupOf(apiVersion) == "" && strings.EqualFold(kind, "ConfigMap") {
		return []string{"binaryData", "data"}
	}
	return nil
}

// checkStringsOnlyData refuses a value other than a string (or null, a removal)
// for a member of a field that holds strings only in the target's kind, in the
// words a label's refusal has, when the change is made rather than once the
// target is read (checkStringValue, which still guards a patch that reaches a
// render another way).
func (p *Patch) checkStringsOnlyData(target objref.Target) error {
	doc, err := p.document()
	if err != nil {
		return err
	}
	for _, field := range stringsOnlyData(target.APIVersion, target.Kind) {
		raw := doc[field]
		m, isMap := raw.(map[string]any)
		if raw != nil && !isMap {
			// null removes the field, as a merge patch does; anything else but an
			// object of strings is no ConfigMap's data.
			return fmt.Errorf("/%s: must be an object of string values, got %s", escapePointer(field), jsonTyped(raw))
		}
		for _, key := range slices.Sorted(maps.Keys(m)) {
			switch v := m[key].(type) {
			case nil, string:
			default:
				return notAString("/"+escapePointer(field)+"/"+escapePointer(key), v)
			}
		}
	}
	return nil
}

// fields lists the paths the patch sets or removes, for texts.
func (p *Patch) fields() []string {
	doc, err := p.document()
	if err != nil {
		return nil
	}
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ptr := prefix + "/" + escapePointer(k)
			if sub, ok := m[k].(map[string]any); ok && len(sub) > 0 {
				walk(ptr, sub)
				continue
			}
			out = append(out, ptr)
		}
	}
	walk("", doc)
	return out
}

// applyMergePatch is the target body with the merge patch applied, through
// evanphx/json-patch's RFC 7386 implementation.
func applyMergePatch(body map[string]any, p *Patch) (map[string]any, error) {
	doc, err := p.document()
	if err != nil {
		return nil, err
	}
	orig, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode target: %w", err)
	}
	patch, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode patch: %w", err)
	}
	merged, err := jsonpatch.MergePatch(orig, patch)
	if err != nil {
		return nil, fmt.Errorf("apply merge patch: %w", err)
	}
	v, err := decodeJSONValue(merged)
	if err != nil {
		return nil, fmt.Errorf("decode patched target: %w", err)
	}
	out, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the patched target is not an object")
	}
	return out, nil
}

// withoutNulls is a merge patch value as it lands where nothing merges into it:
// null members of its objects are dropped (RFC 7386 section 2).
func withoutNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e == nil {
				continue
			}
			out[k] = withoutNulls(e)
		}
		return out
	case []any:
		return x
	}
	return v
}

// mergeOps are the edits that apply merge patch m at path at of doc (the source
// document, or a strategic-merge patch of the target): objects are walked into,
// a null deletes what the document has, anything else is set.
func mergeOps(at yamledit.Path, doc any, m map[string]any) []yamledit.Op {
	cur, _ := doc.(map[string]any)
	var ops []yamledit.Op
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		p := joinPath(at, keys(k))
		existing, has := cur[k]
		switch sub := v.(type) {
		case nil:
			if has {
				ops = append(ops, yamledit.Op{Path: p, Kind: yamledit.OpDelete})
			}
		case map[string]any:
			if em, ok := existing.(map[string]any); ok {
				ops = append(ops, mergeOps(p, em, sub)...)
				continue
			}
			ops = append(ops, yamledit.Op{Path: p, Kind: yamledit.OpSet, Value: withoutNulls(sub)})
		default:
			ops = append(ops, yamledit.Op{Path: p, Kind: yamledit.OpSet, Value: v})
		}
	}
	return ops
}

// patchOps are the in-place edits of a patch change in doc.
func patchOps(doc map[string]any, p *Patch) ([]yamledit.Op, error) {
	m, err := p.document()
	if err != nil {
		return nil, err
	}
	ops := mergeOps(nil, doc, m)
	if len(ops) == 0 {
		return nil, notApplicable("this document has none of the fields the patch removes")
	}
	return ops, nil
}

// mergeJSONPatch writes a JSON 6902 patch that makes merge patch p on the
// rendered target: one add, replace or remove per field, so a list the merge
// patch replaces is replaced whole (a strategic-merge patch would merge it).
func mergeJSONPatch(rendered map[string]any, p *Patch) ([]byte, error) {
	m, err := p.document()
	if err != nil {
		return nil, err
	}
	var ops []map[string]any
	var walk func(prefix string, cur map[string]any, m map[string]any)
	walk = func(prefix string, cur map[string]any, m map[string]any) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ptr := prefix + "/" + escapePointer(k)
			existing, has := cur[k]
			switch sub := m[k].(type) {
			case nil:
				if has {
					ops = append(ops, map[string]any{"op": "remove", "path": ptr})
				}
			case map[string]any:
				if em, ok := existing.(map[string]any); ok {
					walk(ptr, em, sub)
					continue
				}
				ops = append(ops, map[string]any{"op": jsonOp(has), "path": ptr, "value": withoutNulls(sub)})
			default:
				ops = append(ops, map[string]any{"op": jsonOp(has), "path": ptr, "value": sub})
			}
		}
	}
	walk("", rendered, m)
	if len(ops) == 0 {
		return nil, notApplicable("the target has none of the fields the patch removes")
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(ops); err != nil {
		return nil, fmt.Errorf("encode JSON patch: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode JSON patch: %w", err)
	}
	return buf.Bytes(), nil
}

func jsonOp(exists bool) string {
	if exists {
		return "replace"
	}
	return "add"
}

// sets reports whether the patch sets or removes the field at path (nil-safe).
func (p *Patch) sets(path ...string) bool {
	if p == nil {
		return false
	}
	doc, err := p.document()
	if err != nil {
		return false
	}
	_, ok := getPath(doc, path)
	return ok
}

// approxSize is the length of v as JSON, for the bound on a patch.
func approxSize(v any) int {
	data, _ := json.Marshal(v)
	return len(data)
}

// checkPatchLists refuses a patch that gives an object where the target has a
// list: RFC 7386 would replace the list with that object ("/spec/ports/0/port"
// read as a merge patch makes spec.ports a map with a key "0"), which is never
// what was meant and which the API server rejects. The reason names the list
// and, when the object's keys are indexes of it, spells the whole list the
// patch should give instead.
func checkPatchLists(target *object, p *Patch) error {
	doc, err := p.document()
	if err != nil {
		return refuse(CodeInvalidRequest, "%s %s: %v", target.kind, target.name, err)
	}
	var check func(at []string, cur any, m map[string]any) error
	check = func(at []string, cur any, m map[string]any) error {
		cm, _ := cur.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			here := append(append([]string(nil), at...), k)
			if stringsOnly(target, at) {
				if err := checkStringValue(target, here, m[k]); err != nil {
					return err
				}
			}
			sub, ok := m[k].(map[string]any)
			if !ok {
				continue
			}
			list, isList := cm[k].([]any)
			if !isList {
				if err := check(here, cm[k], sub); err != nil {
					return err
				}
				continue
			}
			ptr := "/" + strings.Join(escapeAll(here), "/")
			reason := fmt.Sprintf("%s %s: the patch gives an object for %s, which is a list: a merge patch replaces a list whole, so a field path cannot name one of its items (%s/%s); give the whole list instead",
				target.kind, target.name, strings.Join(here, "."), ptr, escapePointer(slices.Sorted(maps.Keys(sub))[0]))
			if whole, ok := patchedItems(list, sub); ok {
				// The example would show a secret value masked, and given back as it
				// reads it would set that value to the mask: so none is offered.
				data, err := json.Marshal(whole)
				switch {
				case !reflect.DeepEqual(maskValueAt(groupOf(target.apiVersion), target.kind, here, whole), whole):
					reason += " (the list holds secret values, which the service never shows, so it cannot be given whole through it: use a change that names the field, such as an image, env or resources change, or edit the list in the repository)"
				case err == nil && len(data) <= 400:
					reason += fmt.Sprintf(", for example %s=%s", ptr, data)
				}
			}
			return refuse(CodeInvalidRequest, "%s", reason)
		}
		return nil
	}
	return check(nil, target.body, doc)
}

// stringsOnly reports whether the map at path at of the target holds strings
// alone: labels and annotations wherever they are, a ConfigMap's data and
// binaryData.
func stringsOnly(target *object, at []string) bool {
	if n := len(at); n >= 2 && at[n-2] == "metadata" && (at[n-1] == "labels" || at[n-1] == "annotations") {
		return true
	}
	return len(at) == 1 && slices.Contains(stringsOnlyData(target.apiVersion, target.kind), at[0])
}

// checkStringValue refuses a value other than a string (or null, a removal)
// for a field that holds strings: "/metadata/annotations/x=false" reads false
// as JSON, which the API server rejects there and which no edit can render.
func checkStringValue(target *object, at []string, v any) error {
	switch v.(type) {
	case nil, string:
		return nil
	}
	text := flowText(v)
	return refuse(CodeInvalidRequest, "%s %s: the patch gives %s the value %s, but it holds strings only: give the string %q (as a field path, /%s=%s)",
		target.kind, target.name, strings.Join(at, "."), typedText(v), text, strings.Join(escapeAll(at), "/"), strconv.Quote(text))
}

// patchedItems is list with the merge patch of each item applied, when every
// key of m is the index of an item; ok is false otherwise. An item's patch may
// name items of a list inside it the same way ("/spec/template/spec/containers/0/env/1/value"),
// so the example spells the lists at every level, not an object for the inner one.
func patchedItems(list []any, m map[string]any) ([]any, bool) {
	out := make([]any, len(list))
	copy(out, list)
	for k, v := range m {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= len(list) || strconv.Itoa(i) != k {
			return nil, false
		}
		item, ok := patchedValue(list[i], v)
		if !ok {
			return nil, false
		}
		out[i] = item
	}
	return out, true
}

// patchedValue is cur with the merge patch p applied (RFC 7386), except that an
// object given for a list names the list's items by index, as patchedItems does.
func patchedValue(cur, p any) (any, bool) {
	pm, isMap := p.(map[string]any)
	if !isMap {
		return p, true
	}
	if list, isList := cur.([]any); isList {
		items, ok := patchedItems(list, pm)
		return items, ok
	}
	cm, _ := cur.(map[string]any)
	out := make(map[string]any, len(cm)+len(pm))
	maps.Copy(out, cm)
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		merged, ok := patchedValue(cm[k], v)
		if !ok {
			return nil, false
		}
		out[k] = merged
	}
	return out, true
}

func escapeAll(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = escapePointer(k)
	}
	return out
}
