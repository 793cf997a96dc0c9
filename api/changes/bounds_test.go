package changes

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestChangeWordsAreBounded: a change's reason, requester and target and a
// rollback's reason and requester are refused 400 invalid_request past their bounds,
// naming each field over and its bound, before anything is stored or counted; at
// their bounds they are taken. Each was copied, up to the body limit of a megabyte,
// into the change's pull request, commit, check run, notifications and listings.
func TestChangeWordsAreBounded(t *testing.T) {
	db := storetest.SQLite(t)
	srv, token := changesServer(t, db, stubPipeline{db})
	request := func(reason, requestedBy, name string) string {
		b, err := json.Marshal(map[string]any{"cluster": "prod", "reason": reason, "requested_by": requestedBy,
			"target":        map[string]string{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": name},
			"change":        map[string]any{"replicas": map[string]int{"count": 4}},
			"expected_path": "git"})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// Counted in characters, not bytes.
	long := func(n int) string { return strings.Repeat("é", n) }

	for name, tc := range map[string]struct {
		body  string
		names []string
	}{
		"reason":            {request(long(MaxReasonChars+1), "alice", "web"), []string{"reason is 2001 characters long, at most 2000"}},
		"requester":         {request("traffic", long(MaxRequestedByChars+1), "web"), []string{"requested_by is 201 characters long, at most 200"}},
		"target name":       {request("traffic", "alice", strings.Repeat("w", 254)), []string{"target.name is 254 characters long, at most 253"}},
		"all three at once": {request(long(3000), long(300), strings.Repeat("w", 300)), []string{"reason", "requested_by", "target.name"}},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := callAs(srv, token, "POST", "/api/v1/changes", tc.body)
			if status != http.StatusBadRequest {
				t.Fatalf("%d %.300s, want 400", status, body)
			}
			wantCode(t, body, "invalid_request")
			for _, want := range tc.names {
				if !bytes.Contains(body, []byte(want)) {
					t.Errorf("%.300s does not say %q", body, want)
				}
			}
		})
	}
	if status, body := callAs(srv, token, "GET", "/api/v1/changes", ""); status != http.StatusOK || !bytes.Contains(body, []byte(`"changes":[]`)) {
		t.Fatalf("refused requests stored: %d %.300s", status, body)
	}

	status, body := callAs(srv, token, "POST", "/api/v1/changes", request(long(MaxReasonChars), long(MaxRequestedByChars), "web"))
	if status != http.StatusAccepted {
		t.Fatalf("a change at the bounds: %d %.300s, want 202", status, body)
	}
	var created struct{ Code string }
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	status, body = callAs(srv, token, "POST", "/api/v1/changes/"+created.Code+"/rollback",
		`{"reason":"`+long(MaxReasonChars+1)+`","requested_by":"alice"}`)
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("reason is 2001 characters long")) {
		t.Errorf("a rollback over the reason's bound: %d %.300s, want 400 naming reason", status, body)
	}
}

// TestIdempotencyKeyIsBoundedInCharacters: an idempotency key is held to the 200
// characters its refusal names, whatever their bytes: 200 characters of four bytes
// each are taken and kept whole (the same key answers the same change, 200), 201
// are refused naming the count and the bound (failed before: the bound was 200
// bytes, so 51 such characters were refused as "longer than 200 characters").
func TestIdempotencyKeyIsBoundedInCharacters(t *testing.T) {
	db := storetest.SQLite(t)
	srv, token := changesServer(t, db, stubPipeline{db})
	request := func(key string) string {
		b, err := json.Marshal(map[string]any{"cluster": "prod", "reason": "traffic", "requested_by": "alice", "idempotency_key": key,
			"target": map[string]string{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web"},
			"change": map[string]any{"replicas": map[string]int{"count": 4}}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	atBound := strings.Repeat("🔑", plan.MaxIdempotencyKeyChars)
	status, body := callAs(srv, token, "POST", "/api/v1/changes", request(atBound))
	var created ChangeView
	if status != http.StatusAccepted || json.Unmarshal(body, &created) != nil || created.IdempotencyKey != atBound {
		t.Fatalf("a key of %d four-byte characters: %d %.300s, want 202 keeping the key whole", plan.MaxIdempotencyKeyChars, status, body)
	}
	if status, body := callAs(srv, token, "POST", "/api/v1/changes", request(atBound)); status != http.StatusOK || !bytes.Contains(body, []byte(created.Code)) {
		t.Errorf("the same key again: %d %.300s, want 200 with change %s", status, body, created.Code)
	}
	status, body = callAs(srv, token, "POST", "/api/v1/changes", request(atBound+"k"))
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("idempotency_key is 201 characters long, at most 200 are taken")) {
		t.Errorf("a key of 201 characters: %d %.300s, want 400 naming the count and the bound", status, body)
	}
	wantCode(t, body, plan.CodeInvalidRequest)
}
