package changes

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestChangeBodiesRefuseUnknownFieldsAtEveryDepth: a change's body is decoded
// strictly all through, the entries of a patch's set too, whose decoding is its own:
// a misspelt key beside path and value was dropped and the change taken (202).
func TestChangeBodiesRefuseUnknownFieldsAtEveryDepth(t *testing.T) {
	db := storetest.SQLite(t)
	srv, token := changesServer(t, db, stubPipeline{db})
	const base = `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},` +
		`"change":CHANGE,"reason":"traffic","requested_by":"alice"}`
	for name, tc := range map[string]struct {
		change, field string
	}{
		"a replicas change":   {`{"replicas":{"count":4,"cuont":5}}`, "cuont"},
		"a patch's set entry": {`{"patch":{"set":[{"path":"/spec/minReadySeconds","value":10,"vaule":11}]}}`, "vaule"},
		"a patch":             {`{"patch":{"set":[{"path":"/spec/minReadySeconds","value":10}],"sets":[]}}`, "sets"},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := callAs(srv, token, "POST", "/api/v1/changes", strings.Replace(base, "CHANGE", tc.change, 1))
			if status != http.StatusBadRequest || !bytes.Contains(body, []byte(`\"`+tc.field+`\"`)) {
				t.Fatalf("%d %s; want 400 invalid_json naming %q", status, body, tc.field)
			}
			wantCode(t, body, "invalid_json")
		})
	}
}
