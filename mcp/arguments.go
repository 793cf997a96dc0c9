package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kukie/kukie-gitops/server"
)

// handlerFor is a tool's handler given its decoded arguments, as the MCP
// library's typed handlers are.
type handlerFor[In any] func(context.Context, *sdk.CallToolRequest, In) (*sdk.CallToolResult, any, error)

// addTool adds a tool whose arguments are decoded as the HTTP API decodes a
// request body and refused in its words, naming the field ("invalid_request:
// request body is not valid: code: must be a string, got number"), then held to
// the schema the library would infer from In, which the tool advertises (a missing
// member is refused naming it). The library's own validation refused a value of
// the wrong type first, naming a schema path ("validating /properties/code: type:
// 3 has type \"integer\", want \"string\"") rather than the field, and in other
// words than the HTTP API's for the same value.
func addTool[In any](s *sdk.Server, t *sdk.Tool, h handlerFor[In]) {
	addDecodedTool(s, t, h, false)
}

// addBodyTool is addTool for a tool whose arguments are the body of an HTTP API
// route (propose_git_change's are POST /api/v1/changes', decide_path's POST
// /api/v1/decide's), whose own checks refuse a missing member in the route's words
// ("cluster is required"): the arguments are held to the schema less its required
// members.
func addBodyTool[In any](s *sdk.Server, t *sdk.Tool, h handlerFor[In]) {
	addDecodedTool(s, t, h, true)
}

func addDecodedTool[In any](s *sdk.Server, t *sdk.Tool, h handlerFor[In], routeChecksRequired bool) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err))
	}
	held := schema
	if routeChecksRequired {
		held = schema.CloneSchemas()
		dropRequired(held)
	}
	check, err := held.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err))
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
		var instance map[string]any
		if err := json.Unmarshal(args, &instance); err != nil {
			return errorResult(fmt.Errorf("invalid_json: %v", err)), nil
		}
		dropNulls(instance)
		if err := check.Validate(instance); err != nil {
			return errorResult(fmt.Errorf("invalid_request: %v", err)), nil
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
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

// dropRequired removes the required members of s and of the schemas of its
// members, items and map values (all an inferred schema nests).
func dropRequired(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Required = nil
	for _, p := range s.Properties {
		dropRequired(p)
	}
	dropRequired(s.AdditionalProperties)
	dropRequired(s.Items)
}

// dropNulls removes the members of v's objects that are null, which the decoder
// takes as not given: held to the schema, "reason": null was refused as a value of
// type null at a schema path, where the HTTP API says "reason is required" and a
// tool's schema that the argument is missing.
func dropNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, member := range x {
			if member == nil {
				delete(x, k)
				continue
			}
			dropNulls(member)
		}
	case []any:
		for _, item := range x {
			dropNulls(item)
		}
	}
}
