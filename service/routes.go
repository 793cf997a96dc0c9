package service

// Route is one route of the service as Routes lists it.
type Route struct {
	// Pattern is the method and path, as the route is mounted (net/http patterns).
	Pattern string
	// By is the package whose handler serves it.
	By string
	// Access says who may call it: anyone, GitHub (signed or with a one-time state),
	// or a team token with the named scope (the dev team's token-less requests have
	// every scope).
	Access string
	// Serves says what the route is for.
	Serves string
}

// Access values.
const (
	accessAnyone = "anyone"
	accessGitHub = "GitHub"
	accessRead   = "token, read scope"
	accessChange = "token, change scope"
	accessAdmin  = "token, admin scope"
	// accessSignIn: a person signed in with GitHub who can read the repository of
	// the change or check (package web checks with GitHub).
	accessSignIn = "GitHub sign-in, read access to the repository"
)

// Routes is every route the service serves: New mounts exactly these (GET /metrics
// moves to its own listener when metrics.address is set), and a test holds the table
// to what the server mounts and to the access each route enforces.
var Routes = []Route{
	{"GET /healthz", "server", accessAnyone, "liveness"},
	{"GET /readyz", "server", accessAnyone, "readiness: the database answers, migrations applied, the pipeline built when an App is configured"},
	{"POST /webhooks/github", "api/webhook", accessGitHub, "GitHub's deliveries (HMAC-signed), into the inbox"},
	{"GET /github/setup", "api/setup", accessGitHub, "GitHub's setup callback (one-time state): binds an installation"},
	{"POST /api/v1/installations/state", "api/setup", accessAdmin, "an install link for the team"},
	{"GET /api/v1/installations", "api/setup", accessAdmin, "the team's installations"},
	{"POST /api/v1/clusters", "api/setup", accessAdmin, "register a cluster"},
	{"GET /api/v1/clusters", "api/setup", accessAdmin, "the team's clusters"},
	{"PUT /api/v1/clusters/{cluster}/kubeconfig", "api/setup", accessAdmin, "replace a cluster's kubeconfig"},
	{"POST /api/v1/clusters/{cluster}/repos", "api/setup", accessAdmin, "connect a repository to a cluster"},
	{"GET /api/v1/clusters/{cluster}/repos", "api/setup", accessAdmin, "the cluster's connected repositories"},
	{"DELETE /api/v1/clusters/{cluster}/repos", "api/setup", accessAdmin, "disconnect a repository"},
	{"GET /api/v1/clusters/{cluster}/repos/suggestions", "api/setup", accessAdmin, "the repositories the cluster's Applications deploy from"},
	{"POST /api/v1/internal/tokens", "api/setup", accessAdmin, "a repository-scoped installation token for an agent"},
	{"POST /api/v1/changes", "api/changes", accessChange, "submit a change"},
	{"GET /api/v1/changes", "api/changes", accessRead, "the team's changes"},
	{"GET /api/v1/changes/{code}", "api/changes", accessRead, "one change and its history"},
	{"POST /api/v1/changes/{code}/cancel", "api/changes", accessChange, "cancel a change"},
	{"POST /api/v1/changes/{code}/rollback", "api/changes", accessChange, "revert a deployed change"},
	{"POST /api/v1/changes/{code}/retry", "api/changes", accessChange, "retry a failed change"},
	{"POST /api/v1/decide", "api/changes", accessRead, "the path decision alone (Git or direct)"},
	{"GET /api/v1/clusters/{cluster}/argocd/apps", "api/changes", accessRead, "the cluster's Argo CD Applications"},
	{"GET /api/v1/clusters/{cluster}/argocd/apps/{namespace}/{name}", "api/changes", accessRead, "one Application"},
	{"GET /api/v1/clusters/{cluster}/repository", "api/changes", accessRead, "the repository view: folders, Applications, masked renders at a commit"},
	{"GET /api/v1/openapi.json", "api/changes", accessAnyone, "the OpenAPI document of every token route"},
	{"/mcp", "mcp", accessRead, "the MCP tool server over the change API"},
	{"POST /api/v1/notifications/endpoints", "notify", accessAdmin, "register a notification endpoint (its secret shown once)"},
	{"GET /api/v1/notifications/endpoints", "notify", accessAdmin, "the team's notification endpoints"},
	{"DELETE /api/v1/notifications/endpoints/{id}", "notify", accessAdmin, "remove an endpoint"},
	{"POST /api/v1/notifications/endpoints/{id}/resume", "notify", accessAdmin, "resume a paused endpoint"},
	{"GET /api/v1/notifications/endpoints/{id}/deliveries", "notify", accessAdmin, "an endpoint's delivery log"},
	{"GET " + MetricsPath, "service", accessAnyone, "Prometheus metrics"},
	{"GET /changes/{code}", "web", accessSignIn, "a change's web page for people, the check run's details link"},
	{"GET /checks/{id}", "web", accessSignIn, "the web page of a pull request's kukie/render check, that run's details link"},
	{"GET /auth/github/callback", "web", accessGitHub, "GitHub's redirect back after sign-in (state bound to the browser)"},
	{"POST /auth/signout", "web", accessAnyone, "sign out of the web pages"},
	{"GET /assets/style.css", "web", accessAnyone, "the web pages' stylesheet"},
}
