package plan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/server"
)

// FuzzChangeRequest decodes a body as POST /api/v1/changes does and validates
// the request as the pipeline does. Neither panics; a body refused is answered
// 400 with a reason; a request refused has its invalid_request code and a reason
// no longer than a few times the body (what it quotes); the same request is
// always refused in the same words (a client retrying, or a test, compares them);
// and a request accepted is still accepted, and the same, once encoded again.
func FuzzChangeRequest(f *testing.F) {
	base := `"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},"reason":"more","requested_by":"ann"`
	for _, change := range []string{
		`{"replicas":{"count":3}}`,
		`{"image":{"container":"web","name":"nginx","tag":"1.27"}}`,
		`{"env":{"container":"web","set":{"A":"1","B":"2"},"unset":["C"]}}`,
		`{"env":{"container":"web","set":{"1A":"1","2B":"2","3C":"3","4D":"4","5E":"5","6F":"6","7G":"7","8H":"8"}}}`,
		`{"resources":{"container":"web","requests":{"cpu":"x","memory":"y"},"limits":{"cpu":"z"}}}`,
		`{"patch":{"set":[{"path":"/spec/paused","value":true},{"path":"/metadata/labels/a","value":null}]}}`,
		`{"patch":{"merge":{"spec":{"template":{"metadata":{"annotations":{"a":"b"}}}}}}}`,
		`{"patch":{"set":[{"path":"/spec"}]}}`,
		`{"delete_resource":{}}`,
	} {
		f.Add([]byte(`{` + base + `,"change":` + change + `}`))
	}
	f.Add([]byte(`{` + base + `,"change":{"new_resource":{"manifest":"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"}},"application":{"namespace":"argocd","name":"shop"}}`))
	f.Add([]byte(`{"cluster":"prod","cluster":"dev"}`))
	f.Add([]byte(`{"reason":"a\u0000b"}`))
	f.Add([]byte(`{"target":{"apiVersion":"ap\u0440s/v1","kind":"D\u00e9ployment","name":"w\u202eb"},"idempotency_key":"\u001b[2J"}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ok := decodeRequest(t, body)
		if !ok {
			return
		}
		err := req.Validate()
		if err != nil {
			var pe *plan.Error
			if !errors.As(err, &pe) || pe.Code != plan.CodeInvalidRequest || strings.TrimSpace(pe.Reason) == "" {
				t.Fatalf("refused without its code or a reason: %#v", err)
			}
			if len(pe.Reason) > 8*len(body)+4096 {
				t.Fatalf("reason of %d bytes for a body of %d", len(pe.Reason), len(body))
			}
			for range 10 {
				if again := req.Validate(); again == nil || again.Error() != err.Error() {
					t.Fatalf("the same request refused in other words:\n%v\n%v", err, again)
				}
			}
			return
		}
		encoded, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encode accepted request: %v", err)
		}
		again, ok := decodeRequest(t, encoded)
		if !ok {
			t.Fatalf("accepted request refused once encoded: %s", encoded)
		}
		if err := again.Validate(); err != nil {
			t.Fatalf("accepted request refused once encoded: %v\n%s", err, encoded)
		}
		if reencoded, _ := json.Marshal(again); !bytes.Equal(reencoded, encoded) {
			t.Fatalf("accepted request changed once encoded:\n%s\n%s", encoded, reencoded)
		}
	})
}

// decodeRequest decodes body as the change API does, and checks its answer when
// it refuses the body.
func decodeRequest(t *testing.T, body []byte) (plan.Request, bool) {
	t.Helper()
	var req plan.Request
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/api/v1/changes", bytes.NewReader(body))
	if server.DecodeJSON(w, r, &req) {
		return req, true
	}
	var answer server.ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || w.Code != http.StatusBadRequest ||
		answer.Error == "" || strings.TrimSpace(answer.Reason) == "" {
		t.Fatalf("body refused with %d %s", w.Code, w.Body.Bytes())
	}
	return req, false
}
