package objref

import (
	"encoding/json"
	"testing"
)

// The change API takes and returns targets in this JSON, and plans requested before
// this type existed were answered in it: the bytes stay as they were.
func TestTargetJSON(t *testing.T) {
	cases := map[string]struct {
		target Target
		json   string
	}{
		"namespaced": {Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			`{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"}`},
		"no namespace": {Target{APIVersion: "v1", Kind: "Namespace", Name: "shop"},
			`{"apiVersion":"v1","kind":"Namespace","name":"shop"}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(tc.target)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.json {
				t.Errorf("encoded %s, want %s", b, tc.json)
			}
			var back Target
			if err := json.Unmarshal([]byte(tc.json), &back); err != nil {
				t.Fatal(err)
			}
			if back != tc.target {
				t.Errorf("decoded %+v, want %+v", back, tc.target)
			}
		})
	}
}

func TestTargetString(t *testing.T) {
	for want, tgt := range map[string]Target{
		"apps/v1 Deployment shop/web": {APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		"v1 Namespace shop":           {APIVersion: "v1", Kind: "Namespace", Name: "shop"},
	} {
		if got := tgt.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
