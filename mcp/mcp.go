// Package mcp serves the change API to assistants as Model Context Protocol tools
// over streamable HTTP at /mcp, authenticated with the team's bearer token like the
// rest of the API.
//
// Every tool is a thin layer over the code the HTTP API runs (package
// api/changes for apps, decisions and changes; the pipeline's AppTree and render's
// masking for the repository), so an assistant and the HTTP API are always answered
// alike. The rules the tools keep:
//
//   - The tool list is the same for every caller and every connection state, so an
//     assistant's cached prompt prefix stays valid. A tool that cannot act answers a
//     tool error whose text is the current decision and what the user can do.
//   - Code decides the route: propose_git_change asks for the Git path, and a target
//     the decision sends elsewhere is refused with that decision.
//   - Every result carries a one-line ownership note ("managed by Argo CD app X with
//     self-heal"), so the model knows who owns a resource before it proposes a change.
//   - The change tools need a token with the change scope; with a read token they
//     answer a tool error saying so.
//   - Repository content is masked (Secrets and secret-looking values) and cut at
//     MaxResultChars with a note.
//   - A tool's arguments are decoded as the HTTP API decodes a body and refused in
//     its words, naming the field or the variable ("env.set.PORT: must be a
//     string, got number 8080", "code: must be a string, got number"), never by a
//     JSON Schema path the model cannot act on; those that are an HTTP route's
//     body (propose_git_change's are POST /api/v1/changes', decide_path's POST
//     /api/v1/decide's, cancel_change's and rollback_change's reason and requester
//     their routes') are refused as that route refuses them.
//   - A request refused before any tool runs (a batch over MaxBatch, a body over the
//     server's limit, a member given twice or a string holding a NUL character, as
//     the change API refuses them, what the MCP library refuses: a missing Accept, another
//     content type, a GET or DELETE of this stateless server) is a JSON-RPC error
//     with the refusal's status, never plain text.
//   - A tool counts against the same per-team limit as its HTTP route (changes;
//     repository reads; decisions and Application reads); past it the tool error
//     starts "rate_limited:" and says when to retry.
//
// The server is stateless (no MCP session is kept between requests), so every call
// is authenticated on its own and any replica can answer it.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

// Path is where the tool server is mounted.
const Path = "/mcp"

// MaxResultChars bounds the text of a repository tool's result; what is cut is said
// in a note, so the model does not take a partial file for a whole one.
const MaxResultChars = 24000

// MaxBatch is the most messages one JSON-RPC batch may hold (protocol versions
// before 2025-06-18 allow batches). Every call of a batch runs and its answer is
// held until the last is done, so an unbounded batch would turn one request into
// thousands of calls and their answers into one body.
const MaxBatch = 10

// Changes is the change API's operations (*changes.API implements it).
type Changes interface {
	CreateChange(ctx context.Context, t store.Team, req plan.Request) (store.Plan, bool, error)
	Change(ctx context.Context, t store.Team, code string) (changes.ChangeView, error)
	CancelChange(ctx context.Context, t store.Team, code, reason string) (changes.ChangeView, error)
	RollbackChange(ctx context.Context, t store.Team, code, requestedBy, reason string) (changes.ChangeView, error)
	Decide(ctx context.Context, t store.Team, cluster string, target objref.Target) (changes.DecideResponse, error)
	AppListPage(ctx context.Context, t store.Team, cluster string, limit int, before string) (changes.AppListPage, error)
	AppDetail(ctx context.Context, t store.Team, cluster, namespace, name string) (changes.AppDetailView, error)
	CheckCluster(ctx context.Context, t store.Team, name string) error
	RepoView(ctx context.Context, t store.Team, cluster, repo, revision string) (plan.RepoView, error)
	AllowRepositoryRead(t store.Team) error
}

// Trees opens an Application's repository at its revision (*plan.Pipeline
// implements it).
type Trees interface {
	AppTree(ctx context.Context, cluster clusteraccess.Ref, namespace, name string) (*plan.AppTree, error)
}

// Deps are what the tools call.
type Deps struct {
	Changes Changes
	Trees   Trees
	// Version is the service's version, told to clients at initialization.
	Version string
}

// Server is the MCP tool server.
type Server struct {
	deps    Deps
	server  *sdk.Server
	handler http.Handler
}

// New builds the tool server with every tool registered.
func New(deps Deps) *Server {
	s := &Server{deps: deps}
	s.server = sdk.NewServer(&sdk.Implementation{Name: "kukie-gitops", Version: deps.Version}, &sdk.ServerOptions{
		Instructions: "Tools of kukie-gitops: it turns a change request for a Kubernetes resource into a verified pull request " +
			"on the Git repository Argo CD deploys it from. Decide the path with decide_path before proposing; code decides the route, " +
			"not the request. Every result starts with who owns the resource.",
	})
	s.addTools()
	s.handler = boundBatches(jsonRefusals(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.server },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})))
	return s
}

// jsonRefusals answers the MCP library's refusals of a request (a missing Accept,
// another content type, a body that is not JSON-RPC, a method a stateless server
// does not serve), which it writes as plain text, as JSON-RPC errors with the same
// status and text, as every other error of the service is JSON.
func jsonRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &refusalWriter{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		if !rw.refused {
			return
		}
		message := strings.TrimSpace(rw.text.String())
		if rw.status == http.StatusMethodNotAllowed {
			message = "the tool server takes POST alone: it keeps no session, so there is no stream to GET nor a session to DELETE"
		}
		if message == "" {
			message = http.StatusText(rw.status)
		}
		writeRPCError(w, rw.status, message)
	})
}

// maxRefusalText bounds the text of a refusal kept for its JSON-RPC error.
const maxRefusalText = 1 << 10

// refusalWriter holds back a plain-text error answer (http.Error's) for
// jsonRefusals and passes every other answer through.
type refusalWriter struct {
	http.ResponseWriter
	refused bool
	status  int
	text    bytes.Buffer
}

func (rw *refusalWriter) WriteHeader(status int) {
	if status >= http.StatusBadRequest && strings.HasPrefix(rw.Header().Get("Content-Type"), "text/plain") {
		rw.refused, rw.status = true, status
		return
	}
	rw.ResponseWriter.WriteHeader(status)
}

func (rw *refusalWriter) Write(b []byte) (int, error) {
	if !rw.refused {
		return rw.ResponseWriter.Write(b)
	}
	if room := maxRefusalText - rw.text.Len(); room > 0 {
		rw.text.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

// Flush passes a flush of an answer on (the library streams some).
func (rw *refusalWriter) Flush() {
	if f, ok := rw.ResponseWriter.(http.Flusher); ok && !rw.refused {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (rw *refusalWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// boundBatches refuses a POST whose JSON-RPC batch holds more than MaxBatch
// messages, before any of them runs. The body is already bounded by the server's
// body limit; it is read here and handed on whole.
func boundBatches(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", tooLarge.Limit))
				return
			}
			writeRPCError(w, http.StatusBadRequest, "the request body could not be read")
			return
		}
		if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
			var batch []json.RawMessage
			if err := json.Unmarshal(trimmed, &batch); err == nil && len(batch) > MaxBatch {
				writeRPCError(w, http.StatusBadRequest, fmt.Sprintf("a JSON-RPC batch may hold at most %d messages, this one holds %d; "+
					"send the rest in further requests", MaxBatch, len(batch)))
				return
			}
		}
		// What the change API refuses of its bodies (a member given twice, a NUL
		// character) is refused here too, naming it: the library would keep the last
		// member, and a NUL would reach the store, which stores none, and come back
		// as an internal error a retry cannot mend.
		if err := server.CheckJSONText(body); err != nil {
			writeRPCError(w, http.StatusBadRequest, "the request is not taken: "+err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// writeRPCError answers a JSON-RPC "invalid request" error (-32600) with no id: the
// request was refused as a whole.
func writeRPCError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32600, "message": message},
	})
}

// Mount adds the tool server to srv. Listing and reading need the read scope, which
// the route asks for; the change tools check the change scope themselves, so a read
// token sees the same tool list and is told why a change tool refuses.
func (s *Server) Mount(srv *server.Server) {
	srv.Handle(Path, s.handler, server.TeamAuth(store.ScopeRead))
}

// Handler is the tool server without authentication, for embedding behind it.
func (s *Server) Handler() http.Handler { return s.handler }

// caller is the authenticated team of a tool call. The server is stateless, so the
// context of each call is the context of its own HTTP request.
func caller(ctx context.Context) (store.Team, error) {
	t, ok := server.TeamFrom(ctx)
	if !ok {
		return store.Team{}, errors.New("this call carries no authenticated team; send the team's API token as a bearer token")
	}
	return t, nil
}

// needChange refuses a change tool called with a token lacking the change scope.
func needChange(ctx context.Context, tool string) error {
	if server.ScopesFrom(ctx).Has(store.ScopeChange) {
		return nil
	}
	return fmt.Errorf("%s needs a token with the change scope; this token has %s. Reading tools still work; "+
		"ask for a token with the change scope (kukie-gitops token create --scope read,change) to request, cancel or roll back changes", tool, scopesText(server.ScopesFrom(ctx)))
}

func scopesText(s store.Scopes) string {
	if len(s) == 0 {
		return "no scopes"
	}
	return "only " + s.String()
}

// toolError turns what the change API answered into the text of a tool error: the
// code, the reason (which says what the user can do) and, when known, the current
// decision with its ownership note.
func toolError(err error) error {
	var noCluster *changes.ClusterNotFoundError
	var unreadable *changes.ClusterReadError
	var limited *ratelimit.RefusedError
	switch {
	case errors.As(err, &limited):
		return fmt.Errorf("%s: %s", server.CodeRateLimited, limited.Error())
	case errors.As(err, &noCluster):
		return fmt.Errorf("cluster_not_found: %s", noCluster.Error())
	case errors.As(err, &unreadable) && errors.Is(err, clusteraccess.ErrObjectNotFound):
		return fmt.Errorf("not_found: %s", unreadable.Err.Error())
	case errors.As(err, &unreadable):
		return fmt.Errorf("cluster_unavailable: the cluster could not be read (%s); check its registration and network, then try again", unreadable.Err.Error())
	case errors.Is(err, store.ErrNotFound):
		return errors.New("not_found: no such change for this team; list_apps and describe_app show the changes that touched an app")
	}
	if e, ok := plan.AsError(err); ok {
		return errors.New(refusalText(e.Code, e.Reason, nil))
	}
	return &internalError{err: err}
}

// internalError is a failure the assistant can do nothing about but try again. Its
// text does not carry the cause, which may name the service's own workings; the
// tool's handler logs the cause instead, as the HTTP API logs its internal failures.
type internalError struct{ err error }

func (e *internalError) Error() string { return "internal: the request failed; it can be retried" }

func (e *internalError) Unwrap() error { return e.err }

// refusalText is a refusal as a model should read it: code and reason (which says
// what the user can do) first, then the decision that caused it, when the refused
// plan is at hand, with its ownership note.
func refusalText(code, reason string, view *changes.ChangeView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", code, reason)
	if view != nil && view.Decision != nil {
		d := view.Decision
		fmt.Fprintf(&b, "\nCurrent decision: path %s (level %s). %s", d.Path, d.Level, d.Reason)
	}
	if view != nil {
		fmt.Fprintf(&b, "\nOwnership: %s", changeOwnership(*view))
	}
	return b.String()
}

// changeOwnership is the ownership note of a change, from the decision recorded
// with it.
func changeOwnership(v changes.ChangeView) string {
	switch {
	case v.Decision != nil && !v.Decision.Known:
		return argocd.Decision{Known: false, Failure: v.Decision.Failure}.OwnershipNote()
	case v.Application != nil:
		level := argocd.LevelUnknown
		if v.Decision != nil {
			level = v.Decision.Level
		}
		return argocd.OwnershipNote(argocd.AppKey{Namespace: v.Application.Namespace, Name: v.Application.Name}, level)
	case v.Path == string(argocd.PathDirect):
		return argocd.OwnershipNote(argocd.AppKey{}, argocd.LevelNone)
	default:
		return "ownership not decided yet: get_change shows it once the path is decided"
	}
}
