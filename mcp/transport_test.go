package mcp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTransportRefusalsAreJSONRPCErrors: every refusal of the tool server's
// transport (a request the MCP library refuses before any tool runs: a missing
// Accept, another content type, a body that is not JSON, a GET or DELETE of a
// stateless server, an oversized body) is a JSON-RPC error naming what was wrong,
// as the batch bound's is, not the library's plain text.
func TestTransportRefusalsAreJSONRPCErrors(t *testing.T) {
	e := newEnv(t)
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	cases := map[string]struct {
		method, contentType, accept, body string
		wantStatus                        int
		wantText                          string
	}{
		"no event stream accepted": {"POST", "application/json", "application/json", initialize, http.StatusBadRequest, "Accept"},
		"form content":             {"POST", "application/x-www-form-urlencoded", "application/json, text/event-stream", "a=b", http.StatusUnsupportedMediaType, "Content-Type"},
		"not JSON":                 {"POST", "application/json", "application/json, text/event-stream", "{", http.StatusBadRequest, "malformed"},
		"a GET":                    {"GET", "", "text/event-stream", "", http.StatusMethodNotAllowed, ""},
		"a DELETE":                 {"DELETE", "", "application/json, text/event-stream", "", 0, ""},
		"over the body limit":      {"POST", "application/json", "application/json, text/event-stream", `{"x":"` + strings.Repeat("x", 1<<20) + `"}`, http.StatusRequestEntityTooLarge, "bytes"},
		// Refused as the change API refuses them (failed before: the call ran, the
		// NUL answered "internal: the request failed; it can be retried" by a
		// store that holds none, the second code of a member given twice taken).
		"a NUL in an argument": {"POST", "application/json", "application/json, text/event-stream",
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_change","arguments":{"code":"a\u0000b"}}}`,
			http.StatusBadRequest, `the string at "/params/arguments/code" holds a NUL character`},
		"a member given twice": {"POST", "application/json", "application/json, text/event-stream",
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_change","arguments":{"code":"a","code":"b"}}}`,
			http.StatusBadRequest, `member "/params/arguments/code" is given twice`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, e.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			req.Header.Set("Accept", tc.accept)
			res, err := (&http.Client{Transport: bearer{e.read}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode < 400 || (tc.wantStatus != 0 && res.StatusCode != tc.wantStatus) {
				t.Fatalf("%d %s, want a refusal %d", res.StatusCode, body, tc.wantStatus)
			}
			var rpc struct {
				JSONRPC string `json:"jsonrpc"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || json.Unmarshal(body, &rpc) != nil ||
				rpc.JSONRPC != "2.0" || rpc.Error.Code == 0 || rpc.Error.Message == "" || !strings.Contains(rpc.Error.Message, tc.wantText) {
				t.Errorf("%d %s (%s), want a JSON-RPC error saying %q", res.StatusCode, body, res.Header.Get("Content-Type"), tc.wantText)
			}
		})
	}
}
