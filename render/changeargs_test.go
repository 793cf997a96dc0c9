package render

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/objref"
)

func TestParseChangeArgs(t *testing.T) {
	manifests := map[string]string{
		"new.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\n",
		"patch.yaml": "spec:\n  requireApproval: false\n",
	}
	read := func(name string) ([]byte, error) {
		m, ok := manifests[name]
		if !ok {
			return nil, errors.New("no such file " + name)
		}
		return []byte(m), nil
	}
	web := objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	for name, tc := range map[string]struct {
		args   []string
		target objref.Target
		change Change
		err    string
	}{
		"scale by short name": {args: []string{"scale", "deploy/web", "--replicas", "4", "-n", "shop"},
			target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}, change: Change{Replicas: &Replicas{Count: 4}}},
		"image by digest": {args: []string{"set-image", "deployment/web", "app=registry:5000/web@sha256:abc"},
			target: web, change: Change{Image: &Image{Container: "app", Name: "registry:5000/web", Digest: "sha256:abc"}}},
		"env set and unset": {args: []string{"set-env", "deployment/web", "-c", "app", "A=1", "B-"},
			target: web, change: Change{Env: &Env{Container: "app", Set: map[string]string{"A": "1"}, Unset: []string{"B"}}}},
		"resources": {args: []string{"set-resources", "deployment/web", "-c", "app", "--requests", "cpu=100m,memory=", "--limits", "cpu=1"},
			target: web, change: Change{Resources: &Resources{Container: "app", Requests: map[string]string{"cpu": "100m", "memory": ""}, Limits: map[string]string{"cpu": "1"}}}},
		"a custom kind": {args: []string{"scale", "Widget/w", "--api-version", "example.com/v1", "--replicas", "0"},
			target: objref.Target{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}, change: Change{Replicas: &Replicas{Count: 0}}},
		"add reads the manifest through the reader": {args: []string{"add", "-f", "new.yaml"},
			change: Change{NewResource: &NewResource{Manifest: manifests["new.yaml"]}}},
		"patch as a merge patch": {args: []string{"patch", "Agent/support", "--api-version", "agents.example.com/v1", "--merge", `{"spec":{"toolNames":["a"]}}`},
			target: objref.Target{APIVersion: "agents.example.com/v1", Kind: "Agent", Name: "support"}, change: Change{Patch: &Patch{Merge: map[string]any{"spec": map[string]any{"toolNames": []any{"a"}}}}}},
		"patch from a YAML file": {args: []string{"patch", "deploy/web", "-f", "patch.yaml"},
			target: web, change: Change{Patch: &Patch{Merge: map[string]any{"spec": map[string]any{"requireApproval": false}}}}},
		"patch by pointers, strings unquoted": {args: []string{"patch", "ing/shop", "/metadata/annotations/a~1b=8m", "/spec/x=null", "/spec/n=3"},
			target: objref.Target{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "shop"},
			change: Change{Patch: &Patch{Set: []FieldValue{{Path: "/metadata/annotations/a~1b", Value: "8m"}, {Path: "/spec/x", Value: nil}, {Path: "/spec/n", Value: int64(3)}}}}},
		"patch with two forms":         {args: []string{"patch", "deploy/web", "--merge", "{}", "/spec/x=1"}, err: "give one of --merge JSON"},
		"patch without a field":        {args: []string{"patch", "deploy/web"}, err: "give one of --merge JSON"},
		"patch, not an object":         {args: []string{"patch", "deploy/web", "--merge", "[1]"}, err: "must be a JSON object"},
		"patch, a number out of range": {args: []string{"patch", "deploy/web", "--merge", `{"a":1e999}`}, err: "out of range"},
		"patch, not JSON":              {args: []string{"patch", "deploy/web", "--merge", "{a"}, err: "merge patch:"},
		"patch, not a pointer":         {args: []string{"patch", "deploy/web", "spec"}, err: `"spec" is not POINTER=VALUE`},
		"nothing":                      {args: nil, err: "no change given"},
		"unknown kind":                 {args: []string{"scale", "widget/w", "--replicas", "1"}, err: `kind "widget" is not known`},
		"no name":                      {args: []string{"scale", "--replicas", "1"}, err: "scale needs KIND/NAME"},
		"scale without a count":        {args: []string{"scale", "deploy/web"}, err: "scale needs --replicas N"},
		"image without a tag":          {args: []string{"set-image", "deploy/web", "app=web"}, err: "has no tag or digest"},
		"a stray argument":             {args: []string{"scale", "deploy/web", "--replicas", "1", "extra"}, err: `unexpected argument "extra"`},
		"a bad quantity":               {args: []string{"set-resources", "deploy/web", "-c", "app", "--limits", "cpu"}, err: `--limits: "cpu" is not name=quantity`},
		"a manifest that fails":        {args: []string{"add", "-f", "gone.yaml"}, err: "read manifest: no such file gone.yaml"},
		"delete":                       {args: []string{"delete", "cm/web-legacy", "-n", "shop"}, target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "web-legacy"}, change: Change{DeleteResource: &DeleteResource{}}},
		"delete by a short name":       {args: []string{"delete", "pdb/web"}, target: objref.Target{APIVersion: "policy/v1", Kind: "PodDisruptionBudget", Name: "web"}, change: Change{DeleteResource: &DeleteResource{}}},
		"delete without a name":        {args: []string{"delete"}, err: "delete needs KIND/NAME"},
		"delete with a stray argument": {args: []string{"delete", "cm/a", "b"}, err: `delete: unexpected argument "b"`},
		"an unknown verb":              {args: []string{"remove", "deploy/web"}, err: `unknown change "remove"`},
	} {
		t.Run(name, func(t *testing.T) {
			target, change, err := ParseChangeArgs(tc.args, read)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseChangeArgs(%q) error %v, want one containing %q", tc.args, err, tc.err)
				}
				return
			}
			if err != nil || target != tc.target || !reflect.DeepEqual(change, tc.change) {
				t.Fatalf("ParseChangeArgs(%q) = %+v %+v (%v), want %+v %+v", tc.args, target, change, err, tc.target, tc.change)
			}
		})
	}
}

// TestReplicasDecodingNeedsTheCount: a replicas change without its count, or with
// a count of null, is refused naming the count, as a field of the wrong type is
// (failed before: either decoded as a count of 0, a change that scales the target
// to no pods); a count of 0 given is still taken.
func TestReplicasDecodingNeedsTheCount(t *testing.T) {
	for _, body := range []string{`{}`, `{"count":null}`} {
		var r Replicas
		err := json.Unmarshal([]byte(body), &r)
		want := "change.replicas.count is required"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v (count %d), want %s", body, err, r.Count, want)
		}
		var wrongType *json.UnmarshalTypeError
		if !errors.As(err, &wrongType) || wrongType.Field == "" {
			t.Errorf("%s: %v is not a field of the request", body, err)
		}
	}
	// A count of the wrong type is still named by its place; an unknown field is
	// refused, as Env's and Resources' own decoding refuse one.
	var c Change
	if err := json.Unmarshal([]byte(`{"replicas":{"count":"3"}}`), &c); fieldOf(err) != "replicas.count" {
		t.Errorf("a count of a string: %v, want it to name replicas.count", err)
	}
	if err := json.Unmarshal([]byte(`{"replicas":{"count":3,"counts":1}}`), &c); err == nil || !strings.Contains(err.Error(), `unknown field "counts"`) {
		t.Errorf("an unknown field: %v", err)
	}
	var r Replicas
	if err := json.Unmarshal([]byte(`{"count":0}`), &r); err != nil || r.Count != 0 {
		t.Errorf("a count of 0: %v (count %d)", err, r.Count)
	}
}

// fieldOf is the field an error of a value of the wrong type names, or "".
func fieldOf(err error) string {
	var wrongType *json.UnmarshalTypeError
	if errors.As(err, &wrongType) {
		return wrongType.Field
	}
	return ""
}

// TestResourcesDecodingNamesTheResource: a quantity of requests or limits that is
// not a string is refused naming the resource, its JSON type and the string to
// give, as a wrong type whose field the request names (failed before: the refusal
// named the requests or limits alone, in encoding/json's words); null is still an
// empty quantity, which removes the resource's, and a field unknown to resources
// is still refused.
func TestResourcesDecodingNamesTheResource(t *testing.T) {
	for body, want := range map[string]string{
		`{"container":"web","requests":{"cpu":1}}`:              `resources.requests.cpu: must be a string, got number 1; give the string "1"`,
		`{"container":"web","limits":{"memory":{"a":1}}}`:       `resources.limits.memory: must be a string, got object {"a":1}`,
		`{"container":"web","limits":{"cpu":"1","gpu ":false}}`: `resources.limits["gpu "]: must be a string, got boolean false; give the string "false"`,
		`{"container":"web","requests":{},"request":{}}`:        `json: unknown field "request"`,
	} {
		var r Resources
		err := json.Unmarshal([]byte(body), &r)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", body, err, want)
		}
		var wrongType *json.UnmarshalTypeError
		if want[0] != 'j' && !errors.As(err, &wrongType) {
			t.Errorf("%s: %v is not a field of the wrong type", body, err)
		}
	}
	var r Resources
	if err := json.Unmarshal([]byte(`{"container":"web","requests":{"cpu":"500m","memory":null},"limits":{"cpu":"1"}}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Container != "web" || !maps.Equal(r.Requests, map[string]string{"cpu": "500m", "memory": ""}) || !maps.Equal(r.Limits, map[string]string{"cpu": "1"}) {
		t.Errorf("decoded %+v", r)
	}
}
