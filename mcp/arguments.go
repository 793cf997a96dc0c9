package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/server"
)

// handlerFor is a tool's handler given its decoded arguments, as the MCP
// library's typed handlers are.
type handlerFor[In any] func(context.Context, *sdk.CallToolRequest, In) (*sdk.CallToolResult, any, error)

// addTool adds a tool whose arguments are decoded as the HTTP API decodes a
// request body and refused in its words, naming the field ("invalid_request:
// request body is not valid: code: must be a string, got number"; a missing
// argument "invalid_request: code is required"). The tool advertises the schema
// the library would infer from In, and its arguments are held to what it says: the
// decoder refuses a value of another type than the schema's, a member it does not
// name and one it names in another case, and the required members of the top
// level are checked here. Those of a nested object are left to its type's
// decoding or the route's checks (change.replicas.count, the target's name): a
// type whose zero value means something, a count of 0, refuses a missing one
// itself. The library's own validation refused them first, naming a schema path
// ("validating /properties/code: type: 3 has type \"integer\", want \"string\"")
// rather than the field, and in other words than the HTTP API's for the same value.
func addTool[In any](s *sdk.Server, t *sdk.Tool, h handlerFor[In]) {
	addDecodedTool(s, t, h, false)
}

// addBodyTool is addTool for a tool whose arguments are the body of an HTTP API
// route (propose_git_change's are POST /api/v1/changes', decide_path's POST
// /api/v1/decide's), whose own checks refuse a missing member in the route's words
// ("cluster is required", "cluster and target {apiVersion, kind, name} are
// required"), which are left to them.
func addBodyTool[In any](s *sdk.Server, t *sdk.Tool, h handlerFor[In]) {
	addDecodedTool(s, t, h, true)
}

func addDecodedTool[In any](s *sdk.Server, t *sdk.Tool, h handlerFor[In], routeChecksRequired bool) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err))
	}
	var required []string
	if !routeChecksRequired {
		required = schema.Required
	}
	tool := *t
	tool.InputSchema = schema
	s.AddTool(&tool, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args := bytes.TrimSpace(req.Params.Arguments)
		if len(args) == 0 || string(args) == "null" {
			args = []byte("{}")
		}
		var in In
		if err := server.DecodeStrict(args, &in); err != nil {
			_, code, reason := server.DecodeRefusal(err)
			return errorResult(fmt.Errorf("%s: %s", code, reason)), nil
		}
		// null is not given, as the decoder takes it.
		var given map[string]any
		if err := json.Unmarshal(args, &given); err != nil {
			return errorResult(fmt.Errorf("invalid_json: %v", err)), nil
		}
		var missing []string
		for _, name := range required {
			if given[name] == nil {
				missing = append(missing, name+" is required")
			}
		}
		if len(missing) > 0 {
			return errorResult(fmt.Errorf("%s: %s", plan.CodeInvalidRequest, strings.Join(missing, "; "))), nil
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			// The answer says only "internal": the log is the one place its cause is told.
			if internal := (*internalError)(nil); errors.As(err, &internal) {
				zerolog.Ctx(ctx).Error().Err(internal.err).Str("tool", t.Name).Msg("Tool call failed")
			}
			return errorResult(err), nil
		}
		if res == nil {
			res = &sdk.CallToolResult{}
		}
		// The structured result and its text, as the library's typed tools answer.
		raw, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encode the result of %s: %w", t.Name, err)
		}
		res.StructuredContent = json.RawMessage(raw)
		if res.Content == nil {
			res.Content = []sdk.Content{&sdk.TextContent{Text: string(raw)}}
		}
		return res, nil
	})
}

func errorResult(err error) *sdk.CallToolResult {
	var res sdk.CallToolResult
	res.SetError(err)
	return &res
}
