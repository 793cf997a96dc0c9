package changes

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/notify"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

// fullSchema is the part of an OpenAPI schema the field walk below reads: nested
// objects and array items, which the top-level schema type of changes_test.go
// keeps as raw JSON.
type fullSchema struct {
	Ref        string                 `json:"$ref"`
	Type       string                 `json:"type"`
	Enum       []string               `json:"enum"`
	Properties map[string]*fullSchema `json:"properties"`
	Items      *fullSchema            `json:"items"`
}

func loadSchemas(t *testing.T) map[string]*fullSchema {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]*fullSchema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc.Components.Schemas
}

// jsonFields lists the JSON names of a struct's fields as encoding/json writes and
// reads them, embedded structs flattened, each with its field's type.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}

// elem strips pointers, and with slices also their element, down to what a schema
// describes.
func elem(typ reflect.Type) reflect.Type {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ
}

var (
	rawMessage = reflect.TypeFor[json.RawMessage]()
	timeType   = reflect.TypeFor[interface{ Format(string) string }]()
)

// compareFields reports, at path, the fields the Go type has and the schema does
// not name and the other way round, and goes into every nested object whose
// schema lists properties (a schema without properties is documented as free-form).
func compareFields(schemas map[string]*fullSchema, path string, s *fullSchema, typ reflect.Type, problems *[]string) {
	for s != nil && s.Ref != "" {
		s = schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	typ = elem(typ)
	if s == nil || typ == rawMessage {
		return
	}
	if typ.Kind() == reflect.Slice && s.Items != nil {
		compareFields(schemas, path+"[]", s.Items, typ.Elem(), problems)
		return
	}
	if typ.Kind() != reflect.Struct || s.Properties == nil || typ.Implements(timeType) {
		return
	}
	fields := jsonFields(typ)
	for name, ft := range fields {
		prop, ok := s.Properties[name]
		if !ok {
			*problems = append(*problems, path+"."+name+": sent or read by the service, not in openapi.json")
			continue
		}
		compareFields(schemas, path+"."+name, prop, ft, problems)
	}
	for name := range s.Properties {
		if _, ok := fields[name]; !ok {
			*problems = append(*problems, path+"."+name+": in openapi.json, not a field of "+typ.String())
		}
	}
}

// TestOpenAPISchemasMatchTheTypes holds every schema of openapi.json to the Go type
// the service decodes a request into or encodes an answer from, field by field and
// both ways, down every nested object the document spells out: a request field the
// document omits is refused by the strict decoder, and an answer field it omits is
// one clients cannot know of.
func TestOpenAPISchemasMatchTheTypes(t *testing.T) {
	schemas := loadSchemas(t)
	types := map[string]reflect.Type{
		"Target":                      reflect.TypeFor[objref.Target](),
		"Change":                      reflect.TypeFor[render.Change](),
		"ChangeRequest":               reflect.TypeFor[plan.Request](),
		"Error":                       reflect.TypeFor[ChangeError](),
		"RepoView":                    reflect.TypeFor[plan.RepoView](),
		"NotificationEndpointRequest": reflect.TypeFor[notify.EndpointRequest](),
		"NotificationEndpoint":        reflect.TypeFor[store.NotificationEndpoint](),
		"NotificationEndpointCreated": reflect.TypeFor[notify.EndpointCreated](),
		"NotificationEndpointList":    reflect.TypeFor[notify.EndpointList](),
		"NotificationDelivery":        reflect.TypeFor[store.NotificationDelivery](),
		"NotificationDeliveryList":    reflect.TypeFor[notify.DeliveryList](),
		"PlanNotification":            reflect.TypeFor[store.PlanNotification](),
		"ConnectionNotification":      reflect.TypeFor[store.ConnectionNotification](),
		"ChangeView":                  reflect.TypeFor[ChangeView](),
		"RevertChange":                reflect.TypeFor[RevertChange](),
		"ChangeList":                  reflect.TypeFor[changeList](),
		"RollbackRequest":             reflect.TypeFor[rollbackRequest](),
		"CancelRequest":               reflect.TypeFor[cancelRequest](),
		"DecideRequest":               reflect.TypeFor[decideRequest](),
		"DecideResponse":              reflect.TypeFor[DecideResponse](),
		"AppList":                     reflect.TypeFor[AppListPage](),
		"AppDetail":                   reflect.TypeFor[AppDetailView](),
		"InstallState":                reflect.TypeFor[setup.InstallState](),
		"Installation":                reflect.TypeFor[setup.Installation](),
		"InstallationList":            reflect.TypeFor[setup.InstallationList](),
		"ClusterRequest":              reflect.TypeFor[setup.ClusterRequest](),
		"KubeconfigRequest":           reflect.TypeFor[setup.KubeconfigRequest](),
		"Cluster":                     reflect.TypeFor[setup.Cluster](),
		"ClusterList":                 reflect.TypeFor[setup.ClusterList](),
		"ConnectRequest":              reflect.TypeFor[setup.ConnectRequest](),
		"RepoConnection":              reflect.TypeFor[setup.RepoConnection](),
		"RepoConnectionList":          reflect.TypeFor[setup.RepoConnectionList](),
		"RepoSuggestions":             reflect.TypeFor[setup.RepoSuggestions](),
		"RepoNotInstalledError":       reflect.TypeFor[setup.RepoNotInstalledError](),
		"TokenRequest":                reflect.TypeFor[setup.TokenRequest](),
		"RepoToken":                   reflect.TypeFor[setup.RepoToken](),
	}
	var problems []string
	for name, s := range schemas {
		typ, ok := types[name]
		if !ok {
			problems = append(problems, name+": a schema this test does not hold to a type")
			continue
		}
		compareFields(schemas, name, s, typ, &problems)
	}
	for name := range types {
		if _, ok := schemas[name]; !ok {
			problems = append(problems, name+": no such schema in openapi.json")
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// TestOpenAPIEnumsAreTheServicesValues holds the documented enums to the values the
// service stores and answers.
func TestOpenAPIEnumsAreTheServicesValues(t *testing.T) {
	schemas := loadSchemas(t)
	view := schemas["ChangeView"].Properties
	var statuses []string
	for _, s := range plan.AllStatuses {
		statuses = append(statuses, string(s))
	}
	cases := map[string]struct {
		documented []string
		want       []string
	}{
		"ChangeView.status": {view["status"].Enum, statuses},
		"ChangeView.deployment.state": {view["deployment"].Properties["state"].Enum,
			[]string{plan.DeployPending, plan.DeployInProgress, plan.DeploySucceeded, plan.DeployFailed, plan.DeployRolledBack}},
		"ChangeView.path":          {view["path"].Enum, []string{"", string(argocd.PathGit), string(argocd.PathDirect)}},
		"ChangeView.cluster_check": {view["cluster_check"].Enum, []string{plan.ClusterCheckPassed, plan.ClusterCheckUnreachable, plan.ClusterCheckSkipped}},
		"ChangeRequest.expected_path": {schemas["ChangeRequest"].Properties["expected_path"].Enum,
			[]string{string(argocd.PathGit), string(argocd.PathDirect)}},
		"DecideResponse.path": {schemas["DecideResponse"].Properties["path"].Enum, []string{string(argocd.PathGit), string(argocd.PathDirect)}},
		"DecideResponse.failure": {schemas["DecideResponse"].Properties["failure"].Enum, []string{string(argocd.FailureNotInstalled),
			string(argocd.FailureForbidden), string(argocd.FailureUnreachable), string(argocd.FailureNotFound), string(argocd.FailureOther)}},
		"NotificationDelivery.event": {schemas["NotificationDelivery"].Properties["event"].Enum,
			[]string{store.EventPlanTransition, store.EventConnectionChanged}},
		"NotificationDelivery.state": {schemas["NotificationDelivery"].Properties["state"].Enum,
			[]string{store.NotificationPending, store.NotificationDelivered}},
		"ConnectionNotification.status": {schemas["ConnectionNotification"].Properties["status"].Enum, []string{string(store.ConnectionConnected),
			string(store.ConnectionPendingApproval), string(store.ConnectionRevoked), store.ConnectionDisconnected}},
	}
	for name, c := range cases {
		got, want := append([]string(nil), c.documented...), append([]string(nil), c.want...)
		sort.Strings(got)
		sort.Strings(want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: openapi.json says %v, the service uses %v", name, got, want)
		}
	}
}

// TestOpenAPINamesEveryErrorCode holds the document's list of error codes to the
// codes the routes answer: every code of the plan package (a refusal the pipeline
// answers at once passes it through), the token checks and the server's own
// refusals of every route, the body decoder,
// writeError's own and those of the administrative routes of package setup.
func TestOpenAPINamesEveryErrorCode(t *testing.T) {
	var doc struct {
		Info struct {
			Description string `json:"description"`
		} `json:"info"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, w := range strings.FieldsFunc(doc.Info.Description, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z')
	}) {
		named[w] = true
	}
	codes := []string{
		"missing_token", "invalid_token", "insufficient_scope", "invalid_json", "body_too_large",
		// the token check's store failing, the dev team's refusals, a method the path is not served with
		"auth_unavailable", "cross_origin_request", "dev_team_not_local", "method_not_allowed",
		plan.CodeInvalidRequest, plan.CodeNotGitOpsManaged, plan.CodeRepoNotConnected, plan.CodeRevisionNotABranch,
		plan.CodeRevisionNotFound, plan.CodeRefused, plan.CodeClusterRejected, plan.CodePathMismatch, plan.CodeAppNotFound,
		plan.CodeUnsupportedSource, plan.CodeEditNoLongerApplies, plan.CodeNotFound, plan.CodeConflict,
		plan.CodePipelineUnavailable, CodeClusterNotFound, "cluster_unavailable", "internal", server.CodeRateLimited,
		// api/setup
		"invalid_cluster_name", "invalid_cluster", "invalid_kubeconfig", "in_cluster_not_allowed", "cluster_exists",
		"credentials_key_missing", "invalid_repo", "repo_not_installed", "installation_suspended", "installation_missing",
		"connection_revoked", "connection_pending_approval", "cluster_unreadable", "suggestions_unavailable", "github_unavailable",
		"github_not_configured",
	}
	for _, c := range codes {
		if !named[c] {
			t.Errorf("openapi.json's description does not name the error code %s", c)
		}
	}
}
