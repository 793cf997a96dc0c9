package mcp_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kukie/kukie-gitops/mcp"
	"github.com/kukie/kukie-gitops/secret"
)

// refusalOfAPI posts body to the HTTP API beside the tools as token's team and
// returns its refusal, "code: reason", as a tool error would say it.
func (e *env) refusalOfAPI(t *testing.T, token secret.Secret, path string, body any) string {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	status, answer := e.askAPI(t, token, http.MethodPost, path, raw)
	var refusal struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(answer, &refusal); err != nil || status < 400 {
		t.Fatalf("POST %s: %d %s (%v), want a refusal", path, status, answer, err)
	}
	return refusal.Error + ": " + refusal.Reason
}

// TestBodyToolsAreRefusedInTheAPIsWords: propose_git_change and decide_path, whose
// arguments are the bodies of POST /api/v1/changes and POST /api/v1/decide, refuse
// what those routes refuse in the same words, naming the field or the variable, and
// store no change (failed before: an env value, a quantity or a replica count of
// the wrong type, an unknown field and a missing cluster were refused by the
// tool's input schema, naming a schema path such as
// "/properties/change/properties/env/properties/set/additionalProperties" and
// neither the variable nor the string to give; null for a string, which the route
// takes as not given, was refused as "<invalid reflect.Value> has type \"null\"";
// a member naming a field in another case, "Cluster", was taken by the route and
// refused by the tool's schema). A replicas change without its count, or with
// null, is refused by both naming the count (failed before: both took it for a
// count of 0, where the tool's schema had required it).
func TestBodyToolsAreRefusedInTheAPIsWords(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.change)
	configMap := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "web"}
	propose := func(target, change any) map[string]any {
		return map[string]any{"cluster": "prod", "target": target, "change": change, "reason": "owner", "requested_by": "alice"}
	}
	for name, c := range map[string]struct {
		args any
		says string
	}{
		"env value a number": {propose(webTarget, map[string]any{"env": map[string]any{"container": "web", "set": map[string]any{"PORT": 8080}}}),
			`env.set.PORT: must be a string, got number 8080; give the string "8080"`},
		"env value null": {propose(webTarget, map[string]any{"env": map[string]any{"container": "web", "set": map[string]any{"DEBUG": nil}}}),
			"env.set.DEBUG: must be a string, got null (to remove the variable, list it in unset)"},
		"label value a number": {propose(webTarget, map[string]any{"patch": map[string]any{"merge": map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": 3}}}}}),
			`/metadata/labels/team: must be a string, got number 3; give the string "3"`},
		"annotation value a boolean": {propose(webTarget, map[string]any{"patch": map[string]any{"set": []any{map[string]any{"path": "/metadata/annotations/example.com~1on", "value": true}}}}),
			"/metadata/annotations/example.com~1on: must be a string, got boolean true"},
		"ConfigMap data value a number": {propose(configMap, map[string]any{"patch": map[string]any{"merge": map[string]any{"data": map[string]any{"PORT": 8080}}}}),
			`/data/PORT: must be a string, got number 8080; give the string "8080"`},
		"replica count a string": {propose(webTarget, map[string]any{"replicas": map[string]any{"count": "3"}}),
			"change.replicas.count: must be a whole number, got string"},
		"replica count missing": {propose(webTarget, map[string]any{"replicas": map[string]any{}}), "change.replicas.count is required"},
		"replica count null":    {propose(webTarget, map[string]any{"replicas": map[string]any{"count": nil}}), "change.replicas.count is required"},
		"quantity a number": {propose(webTarget, map[string]any{"resources": map[string]any{"container": "web", "requests": map[string]any{"cpu": 1}}}),
			`resources.requests.cpu: must be a string, got number 1; give the string "1"`},
		"unset a string": {propose(webTarget, map[string]any{"env": map[string]any{"container": "web", "unset": "DEBUG"}}),
			"change.env.unset: must be a list of strings, got string"},
		"unset a null": {propose(webTarget, map[string]any{"env": map[string]any{"container": "web", "unset": []any{nil}}}),
			`environment variable name "" is not valid`},
		"patch field without a path": {propose(webTarget, map[string]any{"patch": map[string]any{"set": []any{map[string]any{"value": 1}}}}), `field path "" is not a JSON pointer`},
		"reason a number": {map[string]any{"cluster": "prod", "target": webTarget, "change": map[string]any{"replicas": map[string]any{"count": 3}}, "reason": 3, "requested_by": "alice"},
			"reason: must be a string, got number"},
		"application a string": {map[string]any{"cluster": "prod", "target": webTarget, "change": map[string]any{"new_resource": map[string]any{"manifest": "a: b"}},
			"application": "web", "reason": "owner", "requested_by": "alice"}, "application: must be an object, got string"},
		"unknown field": {propose(webTarget, map[string]any{"env": map[string]any{"container": "web", "sett": map[string]any{"A": "b"}}}), `unknown field "sett"`},
		"reason null": {map[string]any{"cluster": "prod", "target": webTarget, "change": map[string]any{"replicas": map[string]any{"count": 3}}, "reason": nil, "requested_by": "alice"},
			"reason is required"},
		"target namespace null": {propose(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": nil, "name": "web"}, map[string]any{"replicas": map[string]any{"count": -1}}),
			"replicas -1 is out of range"},
		"cluster in another case": {map[string]any{"Cluster": "prod", "target": webTarget, "change": map[string]any{"replicas": map[string]any{"count": 3}}, "reason": "owner", "requested_by": "alice"},
			`member "/Cluster" names the field "cluster" in another case`},
		"not an object": {[]any{1}, "invalid_json: request body is not valid: must be an object, got array"},
		"no cluster": {map[string]any{"target": webTarget, "change": map[string]any{"replicas": map[string]any{"count": 3}}, "reason": "owner", "requested_by": "alice"},
			"cluster is required"},
	} {
		t.Run(name, func(t *testing.T) {
			want := e.refusalOfAPI(t, e.change, "/api/v1/changes", c.args)
			got := mustRefuse(t, cs, mcp.ToolProposeGitChange, c.args, c.says)
			if got != want {
				t.Errorf("propose_git_change refused\n  %s\nPOST /api/v1/changes\n  %s", got, want)
			}
		})
	}
	for name, c := range map[string]struct {
		args any
		says string
	}{
		"target name a number": {map[string]any{"cluster": "prod", "target": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": 3}},
			"target.name: must be a string, got number"},
		"cluster a number": {map[string]any{"cluster": 3, "target": webTarget}, "cluster: must be a string, got number"},
		"cluster null":     {map[string]any{"cluster": nil, "target": webTarget}, "cluster and target {apiVersion, kind, name} are required"},
		"no cluster":       {map[string]any{"target": webTarget}, "cluster and target {apiVersion, kind, name} are required"},
	} {
		t.Run("decide "+name, func(t *testing.T) {
			want := e.refusalOfAPI(t, e.change, "/api/v1/decide", c.args)
			got := mustRefuse(t, cs, mcp.ToolDecidePath, c.args, c.says)
			if got != want {
				t.Errorf("decide_path refused\n  %s\nPOST /api/v1/decide\n  %s", got, want)
			}
		})
	}
	e.requirePlans(t, 0, "the refused changes")
}

// TestEveryToolNamesAnArgumentOfTheWrongType: each tool given a number for one of
// its string arguments (a string for list_apps' limit) refuses it naming the
// argument and what it takes, in the words the HTTP API refuses a body's field
// of the wrong type, and cancel_change and rollback_change refuse a reason or a
// requester of the wrong type as their routes refuse it in the body (failed
// before: the tools' input schemas refused them first, naming a schema path,
// "validating /properties/code: type: 3 has type \"integer\", want \"string\"").
func TestEveryToolNamesAnArgumentOfTheWrongType(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.change)
	// A change whose cancel and rollback routes read their bodies.
	code := mustOK(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget,
		"change": map[string]any{"replicas": map[string]any{"count": 4}}, "reason": "traffic", "requested_by": "alice"})["code"].(string)
	schemas := inputSchemas(t, cs)
	tried := 0
	for tool, schema := range schemas {
		for name, property := range schema.Properties {
			wrong, says := any(3), name+": must be a string, got number"
			switch {
			case name == "limit":
				wrong, says = "5", "limit: must be a number, got string"
			case property.Type != "string":
				continue
			}
			args := schema.requiredBut(name)
			args[name] = wrong
			mustRefuse(t, cs, tool, args, "invalid_request: request body is not valid: "+says)
			tried++
		}
	}
	if tried < len(schemas) {
		t.Fatalf("%d arguments tried over %d tools", tried, len(schemas))
	}

	for tool, body := range map[string]map[string]any{
		mcp.ToolCancelChange:   {"reason": 3},
		mcp.ToolRollbackChange: {"requested_by": false},
	} {
		route := map[string]string{mcp.ToolCancelChange: "cancel", mcp.ToolRollbackChange: "rollback"}[tool]
		want := e.refusalOfAPI(t, e.change, "/api/v1/changes/"+code+"/"+route, body)
		args := map[string]any{"code": code}
		for k, v := range body {
			args[k] = v
		}
		if got := mustRefuse(t, cs, tool, args); got != want {
			t.Errorf("%s refused\n  %s\nPOST /api/v1/changes/{code}/%s\n  %s", tool, got, route, want)
		}
	}
}
