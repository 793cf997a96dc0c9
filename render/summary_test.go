package render

import "testing"

// A verification reads as a sentence whatever the counts: a delete that leaves
// one object of an app compared says "1 object", not "1 objects".
func TestAppVerificationSummary(t *testing.T) {
	cases := map[string]AppVerification{
		"web: 1 object compared, 1 changed":  {App: "web", Objects: 1, Changed: 1},
		"web: 2 objects compared, 1 changed": {App: "web", Objects: 2, Changed: 1},
		"web: 0 objects compared, 0 changed": {App: "web"},
	}
	for want, v := range cases {
		if got := v.Summary(); got != want {
			t.Errorf("Summary of %+v = %q, want %q", v, got, want)
		}
	}
}
