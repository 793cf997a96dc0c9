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

// TestTargetsAndWordsNoChangeCanHaveAreRefused: a change or decision whose target
// no Kubernetes object can be (a namespace or name holding a letter of another
// script that reads as the Latin one, a name holding a slash, an apiVersion or
// kind that is none) is refused 400 invalid_request saying what is wrong, the
// value quoted in ASCII; so is a requester, reason or idempotency key holding a
// control character or one that reorders the text around it, which would reach the
// pull request and commit as it is, and an application given with a change other
// than new_resource (failed before: each was taken, 202, the confusable target then
// answered as one Argo CD does not manage, the words copied into the pull request,
// and the application kept with a change refused before its path was decided, so
// listed as one that touched that Application).
func TestTargetsAndWordsNoChangeCanHaveAreRefused(t *testing.T) {
	db := storetest.SQLite(t)
	srv, token := changesServer(t, db, stubPipeline{db})
	type target struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Namespace  string `json:"namespace,omitempty"`
		Name       string `json:"name"`
	}
	web := target{"apps/v1", "Deployment", "shop", "web"}
	request := func(tg target, reason, requestedBy, key string) string {
		b, err := json.Marshal(map[string]any{"cluster": "prod", "target": tg, "change": map[string]any{"replicas": map[string]int{"count": 4}},
			"reason": reason, "requested_by": requestedBy, "idempotency_key": key})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, tc := range map[string]struct {
		body string
		want []string
	}{
		"a Cyrillic o in the namespace": {request(target{"apps/v1", "Deployment", "sh\u043ep", "web"}, "traffic", "alice", ""),
			[]string{`target.namespace \"sh\\u043ep\" is no namespace's name`, "letters of another script look like Latin ones"}},
		"a Cyrillic e in the name": {request(target{"apps/v1", "Deployment", "shop", "w\u0435b"}, "traffic", "alice", ""),
			[]string{`target.name \"w\\u0435b\" is no Deployment's name: it holds characters other than ASCII`}},
		"a slash in the name":    {request(target{"apps/v1", "Deployment", "shop", "we/b"}, "traffic", "alice", ""), []string{`target.name \"we/b\" is no object's name`}},
		"a space in apiVersion":  {request(target{"apps/v1 ", "Deployment", "shop", "web"}, "traffic", "alice", ""), []string{`target.apiVersion \"apps/v1 \" is no API version`}},
		"a space in the kind":    {request(target{"apps/v1", "Deploy ment", "shop", "web"}, "traffic", "alice", ""), []string{`target.kind \"Deploy ment\" is no kind`}},
		"an escape in requester": {request(web, "traffic", "alice\x1b[31m", ""), []string{"requested_by holds the control character U+001B at character 6"}},
		"an override in reason":  {request(web, "traffic \u202edesrever", "alice", ""), []string{"reason holds U+202E at character 9, which reorders"}},
		"a line break in a key":  {request(web, "traffic", "alice", "chat\n42"), []string{"idempotency_key holds the control character U+000A at character 5"}},
		"an application with a replicas change": {strings.Replace(request(web, "traffic", "alice", ""), `"cluster"`, `"application":{"namespace":"argocd","name":"web"},"cluster"`, 1),
			[]string{"application is given with a new_resource change only"}},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := callAs(srv, token, http.MethodPost, "/api/v1/changes", tc.body)
			if status != http.StatusBadRequest {
				t.Fatalf("%d %.400s, want 400", status, body)
			}
			wantCode(t, body, plan.CodeInvalidRequest)
			for _, want := range tc.want {
				if !bytes.Contains(body, []byte(want)) {
					t.Errorf("%s does not say %s", body, want)
				}
			}
		})
	}
	if status, body := callAs(srv, token, http.MethodGet, "/api/v1/changes", ""); status != http.StatusOK || !bytes.Contains(body, []byte(`"changes":[]`)) {
		t.Fatalf("refused requests stored: %d %.300s", status, body)
	}
	status, body := callAs(srv, token, http.MethodPost, "/api/v1/decide", `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"sh\u043ep","name":"web"}}`)
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("is no namespace's name")) {
		t.Errorf("a decision of a confusable namespace: %d %s, want 400 saying so", status, body)
	}

	// What is taken: a reason's lines, and a name only RBAC's kinds (and a
	// PersistentVolume) may hold.
	status, body = callAs(srv, token, http.MethodPost, "/api/v1/changes", request(web, "traffic doubled;\n\tscale up", "alice", ""))
	var created ChangeView
	if status != http.StatusAccepted || json.Unmarshal(body, &created) != nil {
		t.Fatalf("a reason of two lines: %d %.300s, want 202", status, body)
	}
	if status, body := callAs(srv, token, http.MethodPost, "/api/v1/changes/"+created.Code+"/rollback", `{"reason":"undo\u001b[2J","requested_by":"alice"}`); status != http.StatusBadRequest ||
		!bytes.Contains(body, []byte("reason holds the control character U+001B")) {
		t.Errorf("a rollback whose reason holds an escape: %d %s, want 400 saying so", status, body)
	}
	// The stub names each change by its kind: this one is a patch, not a second
	// replicas change.
	role := strings.Replace(request(target{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "syst\u00e8me:lecteur"}, "audit", "alice", "role"),
		`{"replicas":{"count":4}}`, `{"patch":{"merge":{"metadata":{"labels":{"audit":"yes"}}}}}`, 1)
	if status, body := callAs(srv, token, http.MethodPost, "/api/v1/changes", role); status != http.StatusAccepted {
		t.Errorf("a ClusterRole named with an accented letter: %d %.300s, want 202", status, body)
	}
}
