package render

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestPatchValidateRefusesWhatAMergePatchCannotSay(t *testing.T) {
	for name, tc := range map[string]struct {
		patch Patch
		err   string
	}{
		"nothing":            {Patch{}, "a patch needs merge"},
		"both forms":         {Patch{Merge: jsonObject(`{"a":1}`), Set: []FieldValue{{Path: "/a", Value: jsonValue(`1`)}}}, "merge or set, not both"},
		"empty object":       {Patch{Merge: map[string]any{}}, "a patch needs merge"},
		"the name":           {Patch{Merge: jsonObject(`{"metadata":{"name":"x"}}`)}, "sets /metadata/name"},
		"the namespace":      {Patch{Set: []FieldValue{{Path: "/metadata/namespace", Value: jsonValue(`"x"`)}}}, "sets /metadata/namespace"},
		"the kind":           {Patch{Merge: jsonObject(`{"kind":"Pod"}`)}, "sets /kind"},
		"the status":         {Patch{Set: []FieldValue{{Path: "/status/phase", Value: jsonValue(`"Ready"`)}}}, "sets /status"},
		"not a pointer":      {Patch{Set: []FieldValue{{Path: "spec", Value: jsonValue(`1`)}}}, "is not a JSON pointer"},
		"a bad escape":       {Patch{Set: []FieldValue{{Path: "/a~2b", Value: jsonValue(`1`)}}}, "not a valid escape"},
		"an empty key":       {Patch{Set: []FieldValue{{Path: "/spec//x", Value: jsonValue(`1`)}}}, "empty key"},
		"a field twice":      {Patch{Set: []FieldValue{{Path: "/spec/x", Value: jsonValue(`1`)}, {Path: "/spec/x", Value: jsonValue(`2`)}}}, "given twice"},
		"inside a set field": {Patch{Set: []FieldValue{{Path: "/spec", Value: jsonValue(`1`)}, {Path: "/spec/x", Value: jsonValue(`2`)}}}, "lies inside /spec"},
		"too large":          {Patch{Merge: jsonObject(`{"a":"` + strings.Repeat("x", maxPatchBytes) + `"}`)}, "larger than"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.patch.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

func TestPatchAppliesAsRFC7386(t *testing.T) {
	body := map[string]any{
		"apiVersion": "example.com/v1", "kind": "Agent", "metadata": map[string]any{"name": "a"},
		"spec": map[string]any{"tools": []any{"a", "b"}, "keep": "yes", "drop": int64(1), "nested": map[string]any{"x": int64(1)}},
	}
	for name, tc := range map[string]struct {
		patch Patch
		want  map[string]any
	}{
		"lists are replaced, null removes, objects merge": {
			Patch{Merge: jsonObject(`{"spec":{"tools":["c"],"drop":null,"nested":{"y":2.5},"new":{"a":1,"gone":null}}}`)},
			map[string]any{"tools": []any{"c"}, "keep": "yes", "nested": map[string]any{"x": int64(1), "y": 2.5}, "new": map[string]any{"a": int64(1)}},
		},
		"set by pointer is the same merge patch": {
			Patch{Set: []FieldValue{{Path: "/spec/tools", Value: jsonValue(`["c"]`)}, {Path: "/spec/drop", Value: jsonValue(`null`)}, {Path: "/spec/nested/y", Value: jsonValue(`2.5`)}, {Path: "/spec/new/a", Value: jsonValue(`1`)}}},
			map[string]any{"tools": []any{"c"}, "keep": "yes", "nested": map[string]any{"x": int64(1), "y": 2.5}, "new": map[string]any{"a": int64(1)}},
		},
		"an escaped key": {
			Patch{Set: []FieldValue{{Path: "/spec/a~1b~0c", Value: jsonValue(`"v"`)}}},
			map[string]any{"tools": []any{"a", "b"}, "keep": "yes", "drop": int64(1), "nested": map[string]any{"x": int64(1)}, "a/b~c": "v"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := applyMergePatch(body, &tc.patch)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got["spec"], tc.want) {
				g, _ := json.Marshal(got["spec"])
				w, _ := json.Marshal(tc.want)
				t.Fatalf("spec = %s, want %s", g, w)
			}
			if !equalValues(got["metadata"], body["metadata"]) {
				t.Fatalf("metadata changed: %v", got["metadata"])
			}
		})
	}
	if spec := body["spec"].(map[string]any); len(spec["tools"].([]any)) != 2 {
		t.Fatalf("the before-render was changed: %v", spec)
	}
}

// jsonObject and jsonValue decode as a request body is decoded.
func jsonObject(s string) map[string]any {
	m, _ := jsonValue(s).(map[string]any)
	return m
}

func jsonValue(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err)
	}
	return v
}

func TestPatchFieldWithoutAValueIsRefused(t *testing.T) {
	var p Patch
	err := json.Unmarshal([]byte(`{"set":[{"path":"/spec/x"}]}`), &p)
	if err == nil || !strings.Contains(err.Error(), `patch field "/spec/x" has no value`) {
		t.Fatalf("decode = %v, want the missing value named", err)
	}
	if err := json.Unmarshal([]byte(`{"set":[{"path":"/spec/x","value":null}]}`), &p); err != nil || len(p.Set) != 1 || p.Set[0].Value != nil {
		t.Fatalf("decode of a null value = %+v, %v", p, err)
	}
}
