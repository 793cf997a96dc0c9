package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kukie/kukie-gitops/mcp"
	"github.com/kukie/kukie-gitops/plan"
)

// TestProposedContentIsRefusedAtOnce: propose_git_change refuses a change whose
// content no repository can make right with a tool error giving the reason, and
// stores nothing (failed before: each was taken, status preparing, and refused
// only once the repository was read and rendered, or by the cluster's dry-run).
func TestProposedContentIsRefusedAtOnce(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.change)
	for name, tc := range map[string]struct {
		change map[string]any
		want   string
	}{
		"image without a container":      {map[string]any{"image": map[string]any{"container": "", "tag": "1.2.0"}}, "image change needs a container name"},
		"image of no possible container": {map[string]any{"image": map[string]any{"container": "Web", "tag": "1.2.0"}}, `container "Web" is no container's name`},
		"negative replicas":              {map[string]any{"replicas": map[string]any{"count": -3}}, "replicas -3 is out of range"},
		"replicas past int32":            {map[string]any{"replicas": map[string]any{"count": int64(1) << 40}}, "replicas 1099511627776 is out of range"},
		"env variable without a name":    {map[string]any{"env": map[string]any{"container": "web", "unset": []string{""}}}, `environment variable name "" is not valid`},
		"the mask as a secret's value":   {map[string]any{"patch": map[string]any{"set": []any{map[string]any{"path": "/spec/auth/token", "value": "[redacted]"}}}}, `the patch's value of /spec/auth/token holds "[redacted]"`},
		"label key": {map[string]any{"patch": map[string]any{"merge": map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier?": "front"}}}}},
			`"tier?" is not a valid label key`},
	} {
		t.Run(name, func(t *testing.T) {
			mustRefuse(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget, "change": tc.change,
				"reason": "traffic", "requested_by": "alice"}, "invalid_request: ", tc.want)
		})
	}
	e.requirePlans(t, 0, "refused proposals")
}

// TestIdempotencyKeyBoundIsInCharacters: propose_git_change takes a key of 200
// characters of several bytes each, as its schema says, and refuses 201 naming the
// count (failed before: 150 two-byte characters were refused as "longer than 200
// characters").
func TestIdempotencyKeyBoundIsInCharacters(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.change)
	propose := func(key string) map[string]any {
		return map[string]any{"cluster": "prod", "target": webTarget, "change": map[string]any{"replicas": map[string]any{"count": 4}},
			"reason": "traffic", "requested_by": "alice", "idempotency_key": key}
	}
	key := strings.Repeat("é", plan.MaxIdempotencyKeyChars)
	if out := mustOK(t, cs, mcp.ToolProposeGitChange, propose(key)); out["change"].(map[string]any)["idempotency_key"] != key {
		t.Fatalf("the key came back as %v", out["change"].(map[string]any)["idempotency_key"])
	}
	mustRefuse(t, cs, mcp.ToolProposeGitChange, propose(key+"é"), "invalid_request: idempotency_key is 201 characters long, at most 200 are taken")
}

// TestToolsRefuseTargetsAndWordsNoChangeCanHave: propose_git_change and
// decide_path refuse a target no Kubernetes object can be, saying what is wrong
// with it in ASCII, and the change tools a requester or reason holding a control
// character (failed before: a namespace with a Cyrillic о was proposed, and a
// name with a slash decided, as a resource Argo CD does not manage; an escape
// sequence in requested_by was taken into the change).
func TestToolsRefuseTargetsAndWordsNoChangeCanHave(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.change)
	confusable := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "sh\u043ep", "name": "web"}
	mustRefuse(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": confusable,
		"change": map[string]any{"replicas": map[string]any{"count": 4}}, "reason": "traffic", "requested_by": "alice"},
		`invalid_request: target.namespace "sh\u043ep" is no namespace's name`, "letters of another script")
	mustRefuse(t, cs, mcp.ToolDecidePath, map[string]any{"cluster": "prod", "target": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "we/b"}},
		`invalid_request: target.name "we/b" is no object's name`)
	mustRefuse(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget,
		"change": map[string]any{"replicas": map[string]any{"count": 4}}, "reason": "traffic", "requested_by": "alice\x1b[31m"},
		"invalid_request: requested_by holds the control character U+001B")
	e.requirePlans(t, 0, "refused proposals")
	code := mustOK(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget,
		"change": map[string]any{"replicas": map[string]any{"count": 4}}, "reason": "traffic", "requested_by": "alice"})["code"]
	mustRefuse(t, cs, mcp.ToolRollbackChange, map[string]any{"code": code, "requested_by": "bob\u202e"},
		"invalid_request: requested_by holds U+202E at character 4")
}

// everyArgument has a value for each argument a tool requires.
var everyArgument = map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web", "path": "README.md", "repo": connectedRepo,
	"code": "nope", "target": webTarget, "change": map[string]any{"replicas": map[string]any{"count": 4}},
	"reason": "traffic", "requested_by": "alice"}

// inputSchema is what the tests read of a tool's input schema.
type inputSchema struct {
	Required   []string `json:"required"`
	Properties map[string]struct {
		Type any `json:"type"`
	} `json:"properties"`
}

// requiredBut is a value for each argument s requires but left out.
func (s inputSchema) requiredBut(left string) map[string]any {
	args := map[string]any{}
	for _, name := range s.Required {
		if name != left {
			args[name] = everyArgument[name]
		}
	}
	return args
}

// inputSchemas lists the tools' input schemas, by tool name.
func inputSchemas(t *testing.T, cs *sdk.ClientSession) map[string]inputSchema {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]inputSchema{}
	for _, tool := range res.Tools {
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var schema inputSchema
		if err := json.Unmarshal(raw, &schema); err != nil || len(schema.Required) == 0 {
			t.Fatalf("%s requires nothing: %s (%v)", tool.Name, raw, err)
		}
		for _, name := range schema.Required {
			if _, ok := everyArgument[name]; !ok {
				t.Fatalf("%s requires %s, which the tests do not know", tool.Name, name)
			}
		}
		out[tool.Name] = schema
	}
	return out
}

// TestEveryToolNamesEachMissingArgument: each tool called without one of the
// arguments its schema requires, or with null for it, answers a tool error naming
// that argument, before its handler runs, or, for the tools whose arguments are an
// HTTP route's body, in that route's words (see
// TestBodyToolsAreRefusedInTheAPIsWords); every required argument of every tool
// is tried (failed before for null: "validating /properties/code: type: <invalid
// reflect.Value> has type \"null\", want \"string\""), the other tools in the
// HTTP API's words for a missing member ("code is required"; failed before:
// "validating root: required: missing properties: [\"code\"]").
func TestEveryToolNamesEachMissingArgument(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.change)
	schemas := inputSchemas(t, cs)
	tried := 0
	for tool, schema := range schemas {
		for _, missing := range schema.Required {
			args := schema.requiredBut(missing)
			null := schema.requiredBut(missing)
			null[missing] = nil
			for _, args := range []map[string]any{args, null} {
				if tool == mcp.ToolProposeGitChange || tool == mcp.ToolDecidePath {
					mustRefuse(t, cs, tool, args, "invalid_request: ", missing)
				} else {
					mustRefuse(t, cs, tool, args, "invalid_request: "+missing+" is required")
				}
			}
			tried++
		}
	}
	if tried < len(schemas) {
		t.Fatalf("%d arguments tried over %d tools", tried, len(schemas))
	}
}
