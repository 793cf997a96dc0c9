package changes

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// countingPipeline is stubPipeline that counts the requests it is handed.
type countingPipeline struct {
	stubPipeline
	submitted *atomic.Int32
}

func (c countingPipeline) Submit(ctx context.Context, teamID, actor string, req plan.Request) (store.Plan, bool, error) {
	c.submitted.Add(1)
	return c.stubPipeline.Submit(ctx, teamID, actor, req)
}

// TestChangeContentIsRefusedWhenSubmitted: a change whose content no repository
// can make right (an image change without a container, or naming one no container
// can be named; a replica count below 0 or past int32; an env variable without a
// name; a label key or value Kubernetes does not take; a new resource's manifest
// that does not parse) is refused 400 invalid_request with the reason when it is
// submitted, before the pipeline sees it or the team's change limit is taken
// (failed before: each was answered 202 and refused only once the repository was
// read and rendered, or by the cluster's dry-run).
func TestChangeContentIsRefusedWhenSubmitted(t *testing.T) {
	db := storetest.SQLite(t)
	limit, err := ratelimit.New("changes for this team", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	submitted := &atomic.Int32{}
	srv, token := limitedChangesServer(t, db, countingPipeline{stubPipeline{db}, submitted}, API{ChangeLimit: limit})
	request := func(change string) string {
		return `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},` +
			`"change":` + change + `,"reason":"traffic","requested_by":"alice"}`
	}
	for name, tc := range map[string]struct{ change, want string }{
		"image without a container":      {`{"image":{"container":"","tag":"1.2.0"}}`, "image change needs a container name"},
		"image of no possible container": {`{"image":{"container":"Web App","tag":"1.2.0"}}`, `container \"Web App\" is no container's name`},
		"image without tag or digest":    {`{"image":{"container":"web"}}`, "image change needs a tag or a digest"},
		"negative replicas":              {`{"replicas":{"count":-1}}`, "replicas -1 is out of range (0 to 100000)"},
		"replicas past int32":            {`{"replicas":{"count":4294967296}}`, "replicas 4294967296 is out of range (0 to 100000)"},
		"env variable without a name":    {`{"env":{"container":"web","set":{"":"1"}}}`, `environment variable name \"\" is not valid`},
		"env of no possible container":   {`{"env":{"container":"web_1","set":{"A":"1"}}}`, `container \"web_1\" is no container's name`},
		"resources of no container":      {`{"resources":{"container":" web","limits":{"cpu":"1"}}}`, `container \" web\" is no container's name`},
		"label key":                      {`{"patch":{"merge":{"metadata":{"labels":{"team name":"shop"}}}}}`, `/metadata/labels: \"team name\" is not a valid label key`},
		"pod template label key":         {`{"patch":{"set":[{"path":"/spec/template/metadata/labels/-tier","value":"front"}]}}`, `/spec/template/metadata/labels: \"-tier\" is not a valid label key`},
		"label value":                    {`{"patch":{"merge":{"metadata":{"labels":{"tier":"front end"}}}}}`, `/metadata/labels/tier: \"front end\" is not a valid label value`},
		"annotation key":                 {`{"patch":{"merge":{"metadata":{"annotations":{"a/b/c":"x"}}}}}`, `/metadata/annotations: \"a/b/c\" is not a valid annotation key`},
		"manifest that does not parse":   {`{"new_resource":{"manifest":"kind: [ConfigMap"}}`, "the new manifest does not parse"},
		"manifest without a name":        {`{"new_resource":{"manifest":"apiVersion: v1\nkind: ConfigMap\n"}}`, "has no metadata.name"},
		"the mask as a secret's value":   {`{"env":{"container":"web","set":{"DB_PASSWORD":"[redacted]"}}}`, `the value of environment variable DB_PASSWORD holds \"[redacted]\", the text shown in place of a secret value`},
	} {
		t.Run(name, func(t *testing.T) {
			body := request(tc.change)
			if strings.Contains(tc.change, "new_resource") {
				body = strings.Replace(body, `"reason"`, `"application":{"namespace":"argocd","name":"web"},"reason"`, 1)
			}
			status, answer := callAs(srv, token, http.MethodPost, "/api/v1/changes", body)
			if status != http.StatusBadRequest || !bytes.Contains(answer, []byte(tc.want)) {
				t.Fatalf("%d %s; want 400 saying %s", status, answer, tc.want)
			}
			wantCode(t, answer, plan.CodeInvalidRequest)
		})
	}
	if n := submitted.Load(); n != 0 {
		t.Errorf("the pipeline was handed %d refused requests", n)
	}
	// None took the team's one change.
	status, answer := callAs(srv, token, http.MethodPost, "/api/v1/changes", request(`{"replicas":{"count":100000}}`))
	var created ChangeView
	if status != http.StatusAccepted || json.Unmarshal(answer, &created) != nil || created.Code == "" {
		t.Fatalf("a valid change after the refused ones: %d %s, want 202", status, answer)
	}
}

// TestNonStringLabelAndEnvValuesAreRefusedWhenSubmitted: a label, annotation or
// env value that is not a string is refused 400 when the change is submitted,
// naming the field, the key and the value's JSON type, before the pipeline sees it
// (failed before: a label or annotation was answered 202 and refused only once the
// target was read and rendered; an env value of null was taken as "" and one of a
// number refused in words naming neither the variable nor its value). null still
// removes a label. A value of the wrong type is an invalid request, env's as a
// label's, not invalid JSON (failed before: env's answered invalid_json), which
// malformed JSON and an unknown field still are. A known field of the wrong type is
// named by its place in the body with what it takes (failed before: "cannot
// unmarshal string into Go struct field Replicas.change.replicas.count of type
// int64"); a quantity of a resource that is not a string names the resource, as an
// env variable is named (failed before: the refusal named the requests alone), and
// an env change's unset is named as the request writes it (failed before:
// "change.env.plain.unset"). A replicas change without its count, or with null,
// is refused naming the count (failed before: answered 202 as a count of 0).
func TestNonStringLabelAndEnvValuesAreRefusedWhenSubmitted(t *testing.T) {
	db := storetest.SQLite(t)
	submitted := &atomic.Int32{}
	srv, token := changesServer(t, db, countingPipeline{stubPipeline{db}, submitted})
	request := func(change string) string {
		return `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},` +
			`"change":` + change + `,"reason":"traffic","requested_by":"alice"}`
	}
	for name, tc := range map[string]struct{ change, code, want string }{
		"label number":                 {`{"patch":{"merge":{"metadata":{"labels":{"team":3}}}}}`, plan.CodeInvalidRequest, `/metadata/labels/team: must be a string, got number 3; give the string \"3\"`},
		"label by path":                {`{"patch":{"set":[{"path":"/metadata/labels/team","value":3}]}}`, plan.CodeInvalidRequest, `/metadata/labels/team: must be a string, got number 3`},
		"annotation bool":              {`{"patch":{"merge":{"metadata":{"annotations":{"example.com/on":false}}}}}`, plan.CodeInvalidRequest, `/metadata/annotations/example.com~1on: must be a string, got boolean false; give the string \"false\"`},
		"template label":               {`{"patch":{"set":[{"path":"/spec/template/metadata/labels/tier","value":{"a":1}}]}}`, plan.CodeInvalidRequest, `/spec/template/metadata/labels/tier: must be a string, got object {\"a\":1}`},
		"annotation array":             {`{"patch":{"merge":{"metadata":{"annotations":{"note":["x"]}}}}}`, plan.CodeInvalidRequest, `/metadata/annotations/note: must be a string, got array [\"x\"]`},
		"env number":                   {`{"env":{"container":"web","set":{"PORT":8080}}}`, plan.CodeInvalidRequest, `env.set.PORT: must be a string, got number 8080; give the string \"8080\"`},
		"env null":                     {`{"env":{"container":"web","set":{"DEBUG":null}}}`, plan.CodeInvalidRequest, `env.set.DEBUG: must be a string, got null (to remove the variable, list it in unset)`},
		"env object":                   {`{"env":{"container":"web","set":{"CFG":{"a":1}}}}`, plan.CodeInvalidRequest, `env.set.CFG: must be a string, got object {\"a\":1}`},
		"count a string":               {`{"replicas":{"count":"4"}}`, plan.CodeInvalidRequest, `change.replicas.count: must be a whole number, got string`},
		"count not whole":              {`{"replicas":{"count":1.5}}`, plan.CodeInvalidRequest, `change.replicas.count: must be a whole number, got number 1.5`},
		"count missing":                {`{"replicas":{}}`, plan.CodeInvalidRequest, `change.replicas.count is required`},
		"count null":                   {`{"replicas":{"count":null}}`, plan.CodeInvalidRequest, `change.replicas.count is required`},
		"quantity a number":            {`{"resources":{"container":"web","requests":{"cpu":1}}}`, plan.CodeInvalidRequest, `resources.requests.cpu: must be a string, got number 1; give the string \"1\"`},
		"quantity of a named resource": {`{"resources":{"container":"web","limits":{"nvidia.com/gpu":true}}}`, plan.CodeInvalidRequest, `resources.limits.nvidia.com/gpu: must be a string, got boolean true`},
		"unset a string":               {`{"env":{"container":"web","unset":"DEBUG"}}`, plan.CodeInvalidRequest, `change.env.unset: must be a list of strings, got string`},
		"env unknown field":            {`{"env":{"container":"web","set":{"A":"1"},"sett":{}}}`, "invalid_json", `\"sett\"`},
		"env malformed":                {`{"env":{"container":"web","set":{"A":1,}}}`, "invalid_json", `request body is not valid`},
	} {
		t.Run(name, func(t *testing.T) {
			status, answer := callAs(srv, token, http.MethodPost, "/api/v1/changes", request(tc.change))
			if status != http.StatusBadRequest || !bytes.Contains(answer, []byte(tc.want)) {
				t.Fatalf("%d %s; want 400 saying %s", status, answer, tc.want)
			}
			wantCode(t, answer, tc.code)
		})
	}
	if n := submitted.Load(); n != 0 {
		t.Errorf("the pipeline was handed %d refused requests", n)
	}
	for _, change := range []string{`{"patch":{"merge":{"metadata":{"labels":{"team":null,"tier":"3"}}}}}`, `{"env":{"container":"web","set":{"PORT":"8080"},"unset":["DEBUG"]}}`} {
		if status, answer := callAs(srv, token, http.MethodPost, "/api/v1/changes", request(change)); status != http.StatusAccepted {
			t.Errorf("%s: %d %s, want 202", change, status, answer)
		}
	}
}

// TestNonStringConfigMapDataIsRefusedWhenSubmitted: a patch of a ConfigMap (the
// request's target names the kind) giving a data or binaryData key a value that
// is not a string is refused 400 invalid_request when the change is submitted,
// in a label's words, before the pipeline sees it (failed before: answered 202
// and refused only once the target was read and rendered). null still removes a
// key; other kinds' data is theirs; a Secret's is left to the pipeline, which
// refuses any edit of a Secret (secret) without quoting a value back.
func TestNonStringConfigMapDataIsRefusedWhenSubmitted(t *testing.T) {
	db := storetest.SQLite(t)
	submitted := &atomic.Int32{}
	srv, token := changesServer(t, db, countingPipeline{stubPipeline{db}, submitted})
	request := func(apiVersion, kind, change string) string {
		return `{"cluster":"prod","target":{"apiVersion":"` + apiVersion + `","kind":"` + kind + `","namespace":"shop","name":"web"},` +
			`"change":` + change + `,"reason":"config","requested_by":"alice"}`
	}
	for name, tc := range map[string]struct{ kind, change, want string }{
		"data number":       {"ConfigMap", `{"patch":{"set":[{"path":"/data/PORT","value":8080}]}}`, `/data/PORT: must be a string, got number 8080; give the string \"8080\"`},
		"data bool merge":   {"ConfigMap", `{"patch":{"merge":{"data":{"DEBUG":true}}}}`, `/data/DEBUG: must be a string, got boolean true; give the string \"true\"`},
		"data object":       {"ConfigMap", `{"patch":{"merge":{"data":{"a/b":{"x":1}}}}}`, `/data/a~1b: must be a string, got object {\"x\":1}`},
		"binaryData number": {"ConfigMap", `{"patch":{"set":[{"path":"/binaryData/blob","value":3}]}}`, `/binaryData/blob: must be a string, got number 3; give the string \"3\"`},
		"kind in lowercase": {"configmap", `{"patch":{"set":[{"path":"/data/PORT","value":8080}]}}`, `/data/PORT: must be a string, got number 8080`},
		"data a string":     {"ConfigMap", `{"patch":{"merge":{"data":"PORT=8080"}}}`, `/data: must be an object of string values, got string \"PORT=8080\"`},
	} {
		t.Run(name, func(t *testing.T) {
			status, answer := callAs(srv, token, http.MethodPost, "/api/v1/changes", request("v1", tc.kind, tc.change))
			if status != http.StatusBadRequest || !bytes.Contains(answer, []byte(tc.want)) {
				t.Fatalf("%d %s; want 400 saying %s", status, answer, tc.want)
			}
			wantCode(t, answer, plan.CodeInvalidRequest)
		})
	}
	if n := submitted.Load(); n != 0 {
		t.Errorf("the pipeline was handed %d refused requests", n)
	}
	const planted = "54329876"
	for _, tc := range []struct{ apiVersion, kind, change string }{
		{"v1", "ConfigMap", `{"patch":{"merge":{"data":{"PORT":"8080","OLD":null},"binaryData":{"blob":"AAE="}}}}`},
		{"example.com/v1", "ConfigMap", `{"patch":{"set":[{"path":"/data/PORT","value":8080}]}}`},
		{"apps/v1", "Deployment", `{"patch":{"set":[{"path":"/data/PORT","value":8080}]}}`},
		{"v1", "Secret", `{"patch":{"merge":{"stringData":{"port":` + planted + `},"data":{"n":` + planted + `}}}}`},
	} {
		// Each on a database of its own: the stub pipeline gives every patch
		// the same code.
		db := storetest.SQLite(t)
		srv, token := changesServer(t, db, stubPipeline{db})
		status, answer := callAs(srv, token, http.MethodPost, "/api/v1/changes", request(tc.apiVersion, tc.kind, tc.change))
		if status != http.StatusAccepted {
			t.Errorf("%s %s %s: %d %s, want 202", tc.apiVersion, tc.kind, tc.change, status, answer)
		}
		if bytes.Contains(answer, []byte(planted)) {
			t.Errorf("the answer quotes a Secret's value: %s", answer)
		}
	}
}
