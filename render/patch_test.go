package render

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/objref"
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

// TestConfigMapDataThatIsNotAStringIsRefusedWithTheRequest: Change.ValidateFor
// refuses a patch of a ConfigMap giving a data or binaryData key a value that is
// not a string, naming it by JSON pointer with its JSON type and the string to
// give, as a label's is refused, before any repository is read (failed before:
// only the target's render refused it); null removes a key, and another kind's
// data, a custom resource's or a Secret's (which is refused whole once found), is
// not judged by it. The render's own check stays, for binaryData too.
func TestConfigMapDataThatIsNotAStringIsRefusedWithTheRequest(t *testing.T) {
	configMap := objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "web"}
	for name, tc := range map[string]struct {
		target objref.Target
		patch  Patch
		err    string // "" when taken
	}{
		"a number by path":         {configMap, Patch{Set: []FieldValue{{Path: "/data/PORT", Value: jsonValue(`8080`)}}}, `/data/PORT: must be a string, got number 8080; give the string "8080"`},
		"a boolean merged":         {configMap, Patch{Merge: jsonObject(`{"data":{"DEBUG":false}}`)}, `/data/DEBUG: must be a string, got boolean false; give the string "false"`},
		"a list":                   {configMap, Patch{Merge: jsonObject(`{"data":{"a~b":["x"]}}`)}, `/data/a~0b: must be a string, got array ["x"]`},
		"binaryData":               {configMap, Patch{Set: []FieldValue{{Path: "/binaryData/blob", Value: jsonValue(`1.5`)}}}, `/binaryData/blob: must be a string, got number 1.5; give the string "1.5"`},
		"the kind in another case": {objref.Target{APIVersion: "v1", Kind: "configmap", Name: "web"}, Patch{Merge: jsonObject(`{"data":{"N":1}}`)}, `/data/N: must be a string`},
		"data as a string":         {configMap, Patch{Set: []FieldValue{{Path: "/data", Value: jsonValue(`"PORT=8080"`)}}}, `/data: must be an object of string values, got string "PORT=8080"`},
		"binaryData as a list":     {configMap, Patch{Merge: jsonObject(`{"binaryData":["AAE="]}`)}, `/binaryData: must be an object of string values, got array ["AAE="]`},
		"strings and null":         {configMap, Patch{Merge: jsonObject(`{"data":{"PORT":"8080","OLD":null},"binaryData":{"blob":"AAE="}}`)}, ""},
		"a custom resource":        {objref.Target{APIVersion: "example.com/v1", Kind: "ConfigMap", Name: "web"}, Patch{Merge: jsonObject(`{"data":{"N":1}}`)}, ""},
		"another kind":             {objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Patch{Merge: jsonObject(`{"data":{"N":1}}`)}, ""},
		"a Secret":                 {objref.Target{APIVersion: "v1", Kind: "Secret", Name: "db"}, Patch{Merge: jsonObject(`{"stringData":{"port":5432},"data":{"n":1}}`)}, ""},
		"the patch's own refusal":  {configMap, Patch{Merge: jsonObject(`{"metadata":{"name":"x"}}`)}, "sets /metadata/name"},
	} {
		t.Run(name, func(t *testing.T) {
			err := Change{Patch: &tc.patch}.ValidateFor(tc.target)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("ValidateFor() = %v, want it taken", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("ValidateFor() = %v, want an error containing %q", err, tc.err)
			}
		})
	}
	target := &object{apiVersion: "v1", kind: "ConfigMap", name: "web", body: map[string]any{"binaryData": map[string]any{"blob": "AAE="}}}
	err := checkPatchLists(target, &Patch{Set: []FieldValue{{Path: "/binaryData/blob", Value: jsonValue(`3`)}}})
	if err == nil || !strings.Contains(err.Error(), `binaryData.blob the value 3 (a number), but it holds strings only`) {
		t.Fatalf("the render's check of binaryData = %v", err)
	}
}

// TestChangeRefusesTheMaskAsAValue: a value holding the text shown in place of a
// secret, given back as read from a file, a diff or a refusal, would replace the
// secret with that text behind a diff reading "[redacted] -> [redacted]".
func TestChangeRefusesTheMaskAsAValue(t *testing.T) {
	deployment := objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	for name, tc := range map[string]struct {
		change Change
		where  string
	}{
		"an env value":               {(Change{Env: &Env{Container: "web", Set: map[string]string{"MODE": "fast", "DB_PASSWORD": "[redacted]"}}}), "environment variable DB_PASSWORD"},
		"inside a connection string": {(Change{Env: &Env{Container: "web", Set: map[string]string{"DSN": "postgres://app:[redacted]@db/app"}}}), "environment variable DSN"},
		"a field by pointer": {(Change{Patch: &Patch{Set: []FieldValue{{Path: "/spec/template/spec/containers", Value: jsonValue(`[{"name":"web","env":[{"name":"TOKEN","value":"[redacted]"}]}]`)}}}}),
			"/spec/template/spec/containers/0/env/0/value"},
		"a merge patch":  {Change{Patch: &Patch{Merge: jsonObject(`{"spec":{"auth":{"password":"[redacted]"}}}`)}}, "/spec/auth/password"},
		"a new manifest": {Change{NewResource: &NewResource{Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {apiKey: '[redacted]'}\n"}}, "/data/apiKey in document 1 (ConfigMap c) of the new resource's manifest"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.change.ValidateFor(deployment)
			if err == nil || !strings.Contains(err.Error(), tc.where) || !strings.Contains(err.Error(), "shown in place of a secret value") {
				t.Fatalf("ValidateFor() = %v, want a refusal naming %q and the mask", err, tc.where)
			}
		})
	}
	// A comment of a new manifest sets no value (failed before: the manifest's
	// text was searched, and a comment naming the mask refused it).
	commented := Change{NewResource: &NewResource{Manifest: "# values read from the service show as [redacted]\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c} # never [redacted]\ndata: {mode: fast}\n"}}
	if err := commented.ValidateFor(objref.Target{}); err != nil {
		t.Errorf("ValidateFor() of a manifest whose comment names the mask = %v, want nil", err)
	}
	// The word alone, or brackets around another word, is a value like any other.
	for _, v := range []string{"redacted", "[draft]", "[REDACTED-by-policy]"} {
		if err := (Change{Env: &Env{Container: "web", Set: map[string]string{"NOTE": v}}}).ValidateFor(deployment); err != nil {
			t.Errorf("ValidateFor() of %q = %v, want nil", v, err)
		}
	}
}

// TestASecretChangeAsShownIsLeftToTheSecretRefusal: a change view shows each value
// of a Secret's change as the mask; given back as shown, the change of a Secret
// (in any case of its kind), or a new manifest holding one, is not answered with a
// call for the Secret's real value but left to the refusal every change of a
// Secret gets (goldens refuse-patch-secret-as-shown, refuse-new-secret-as-shown).
func TestASecretChangeAsShownIsLeftToTheSecretRefusal(t *testing.T) {
	shown := Change{Patch: &Patch{Merge: jsonObject(`{"stringData":{"password":"[redacted]"}}`)}}
	for _, target := range []objref.Target{{APIVersion: "v1", Kind: "Secret", Name: "db"}, {APIVersion: "v1", Kind: "secret", Name: "db"}} {
		if err := shown.ValidateFor(target); err != nil {
			t.Errorf("ValidateFor(%s) = %v, want it left to the Secret's refusal", target, err)
		}
	}
	secret := Change{NewResource: &NewResource{Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {token: '[redacted]'}\n"}}
	if err := secret.ValidateFor(objref.Target{}); err != nil {
		t.Errorf("ValidateFor() of a new Secret = %v, want it left to the Secret's refusal", err)
	}
	// A custom resource named Secret is no Secret.
	if err := shown.ValidateFor(objref.Target{APIVersion: "example.com/v1", Kind: "Secret", Name: "db"}); err == nil || !strings.Contains(err.Error(), "shown in place of a secret value") {
		t.Errorf("ValidateFor() of a custom Secret = %v, want the mask refused", err)
	}
}
