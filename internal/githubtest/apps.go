package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/secret"
)

const (
	appID   int64 = 4242
	appSlug       = "kukie-gitops"
	appName       = "Kukie GitOps"
	// tokenLifetime is how long GitHub's installation tokens live.
	tokenLifetime = time.Hour
	// maxJWTLifetime is GitHub's limit on an App JWT's exp.
	maxJWTLifetime = 10 * time.Minute
	// jwtClockSkew tolerates clients whose clock runs slightly ahead, as GitHub does.
	jwtClockSkew = 60 * time.Second
)

// Permission levels, ordered.
const (
	PermRead  = "read"
	PermWrite = "write"
	PermAdmin = "admin"
)

// DefaultPermissions are the permissions the fake App asks for and each installation
// grants unless CreateInstallation is told otherwise.
func DefaultPermissions() map[string]string {
	return map[string]string{
		"checks":        PermWrite,
		"contents":      PermWrite,
		"issues":        PermWrite,
		"merge_queues":  PermRead,
		"metadata":      PermRead,
		"pull_requests": PermWrite,
	}
}

// DefaultEvents are the webhook events the fake App is subscribed to (installation
// events are always delivered to an App, as on GitHub).
func DefaultEvents() []string {
	return []string{"check_run", "check_suite", "issue_comment", "merge_group", "pull_request", "push"}
}

var permLevels = map[string]int{PermRead: 1, PermWrite: 2, PermAdmin: 3}

type app struct {
	key    *rsa.PrivateKey
	pem    []byte
	events []string
}

var (
	// appKey is generated once per test process: RSA generation is the slowest part of
	// starting a server and tests gain nothing from distinct keys.
	appKeyOnce sync.Once
	appKey     *rsa.PrivateKey
	appKeyErr  error
)

func newApp() (*app, error) {
	appKeyOnce.Do(func() {
		appKey, appKeyErr = rsa.GenerateKey(rand.Reader, 2048)
	})
	if appKeyErr != nil {
		return nil, fmt.Errorf("generate app key: %w", appKeyErr)
	}
	p := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(appKey)})
	return &app{key: appKey, pem: p, events: DefaultEvents()}, nil
}

type account struct {
	id    int64
	login string
	kind  string // "Organization", "User" or "Bot"
}

type installation struct {
	id          int64
	account     *account
	repoIDs     map[int64]bool
	permissions map[string]string
	events      []string
	createdAt   time.Time
	updatedAt   time.Time
	suspendedAt *time.Time
	deleted     bool
}

type installationToken struct {
	value       string
	inst        *installation
	repoIDs     map[int64]bool // nil: every repository of the installation
	permissions map[string]string
	expiresAt   time.Time
}

// AppID is the fake App's id (the JWT issuer).
func (s *Server) AppID() int64 { return appID }

// AppSlug is the fake App's slug; its bot user is "<slug>[bot]".
func (s *Server) AppSlug() string { return appSlug }

// BotLogin is the login of the App's bot user, the sender of events the App causes.
func (s *Server) BotLogin() string { return appSlug + "[bot]" }

// PrivateKeyPEM is the App's private key in PEM (PKCS#1), as GitHub hands it out.
func (s *Server) PrivateKeyPEM() secret.Secret { return secret.New(string(s.app.pem)) }

// WebhookSecret is the secret the fake signs webhook deliveries with.
func (s *Server) WebhookSecret() secret.Secret { return secret.New(s.webhookSecret) }

// SetSubscribedEvents replaces the events the App is subscribed to.
func (s *Server) SetSubscribedEvents(events ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.app.events = append([]string(nil), events...)
}

// accountLocked returns the account with that login, creating it with kind if new.
func (s *Server) accountLocked(login, kind string) *account {
	key := strings.ToLower(login)
	if a, ok := s.accounts[key]; ok {
		return a
	}
	a := &account{id: s.newID(), login: login, kind: kind}
	s.accounts[key] = a
	return a
}

func (s *Server) botLocked() *account { return s.accountLocked(s.BotLogin(), "Bot") }

// DefaultInstaller is the person who installs the App in CreateInstallation.
const DefaultInstaller = "octocat"

// CreateInstallation installs the App on account for the given repositories ("name"
// or "owner/name"; they must exist) with DefaultPermissions, fires the installation
// "created" webhook and returns the installation id. DefaultInstaller installs it.
func (s *Server) CreateInstallation(t TB, accountLogin string, repos ...string) int64 {
	t.Helper()
	return s.CreateInstallationWithPermissions(t, accountLogin, DefaultPermissions(), repos...)
}

// CreateInstallationBy is CreateInstallation by the person installer (a user, created
// when new): as on GitHub, the "created" webhook's sender is the person who installed
// the App, and they can access the installation (GET /user/installations).
func (s *Server) CreateInstallationBy(t TB, installer, accountLogin string, repos ...string) int64 {
	t.Helper()
	return s.createInstallation(t, installer, "", accountLogin, DefaultPermissions(), repos)
}

// ApproveInstallationRequest installs the App as an organization owner approving a
// member's request to install it does: the "created" webhook's sender is the owner
// and its requester the member who asked. Both can access the installation.
func (s *Server) ApproveInstallationRequest(t TB, owner, requester, accountLogin string, repos ...string) int64 {
	t.Helper()
	return s.createInstallation(t, owner, requester, accountLogin, DefaultPermissions(), repos)
}

// CreateInstallationWithPermissions is CreateInstallation with explicit permissions.
func (s *Server) CreateInstallationWithPermissions(t TB, accountLogin string, perms map[string]string, repos ...string) int64 {
	t.Helper()
	return s.createInstallation(t, DefaultInstaller, "", accountLogin, perms, repos)
}

func (s *Server) createInstallation(t TB, installer, requester, accountLogin string, perms map[string]string, repos []string) int64 {
	t.Helper()
	s.mu.Lock()
	acc := s.accountLocked(accountLogin, "Organization")
	rps, err := s.reposNamedLocked(acc, repos)
	if err != nil {
		s.mu.Unlock()
		t.Fatalf("create installation: %v", err)
	}
	now := s.clock.Now()
	inst := &installation{
		id:          s.newID(),
		account:     acc,
		repoIDs:     map[int64]bool{},
		permissions: copyPerms(perms),
		events:      append([]string(nil), s.app.events...),
		createdAt:   now,
		updatedAt:   now,
	}
	for _, rp := range rps {
		inst.repoIDs[rp.id] = true
	}
	s.installations[inst.id] = inst
	p := s.installationEventLocked(inst, "created", s.accountLocked(installer, "User"))
	s.grantAccessLocked(installer, inst.id)
	if requester != "" {
		p.Requester = s.userJSON(s.accountLocked(requester, "User"))
		s.grantAccessLocked(requester, inst.id)
	}
	p.Repositories = s.installationRepoSummaries(rps)
	done := s.hooks.enqueueLocked("installation", p, inst)
	s.mu.Unlock()
	<-done
	return inst.id
}

// InstallationID returns the id of the (not deleted) installation on account.
func (s *Server) InstallationID(t TB, accountLogin string) int64 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, inst := range s.sortedInstallationsLocked() {
		if !inst.deleted && strings.EqualFold(inst.account.login, accountLogin) {
			return inst.id
		}
	}
	t.Fatalf("no installation on account %s", accountLogin)
	return 0
}

// AddInstallationRepos gives the installation access to more repositories and fires
// installation_repositories "added".
func (s *Server) AddInstallationRepos(t TB, installationID int64, repos ...string) {
	t.Helper()
	s.changeInstallationRepos(t, installationID, "added", repos)
}

// RemoveInstallationRepos takes repositories away from the installation and fires
// installation_repositories "removed". Tokens already issued lose access at once.
func (s *Server) RemoveInstallationRepos(t TB, installationID int64, repos ...string) {
	t.Helper()
	s.changeInstallationRepos(t, installationID, "removed", repos)
}

func (s *Server) changeInstallationRepos(t TB, id int64, action string, repos []string) {
	t.Helper()
	s.mu.Lock()
	inst, ok := s.installations[id]
	if !ok || inst.deleted {
		s.mu.Unlock()
		t.Fatalf("installation %d not found", id)
	}
	rps, err := s.reposNamedLocked(inst.account, repos)
	if err != nil {
		s.mu.Unlock()
		t.Fatalf("%s installation repositories: %v", action, err)
	}
	for _, rp := range rps {
		if action == "added" {
			inst.repoIDs[rp.id] = true
		} else {
			delete(inst.repoIDs, rp.id)
		}
	}
	inst.updatedAt = s.clock.Now()
	ev := &github.InstallationRepositoriesEvent{
		Action:              ptr(action),
		RepositorySelection: ptr("selected"),
		Installation:        s.installationJSON(inst),
		Sender:              s.userJSON(s.accountLocked("octocat", "User")),
	}
	if action == "added" {
		ev.RepositoriesAdded = s.installationRepoSummaries(rps)
		ev.RepositoriesRemoved = []*github.Repository{}
	} else {
		ev.RepositoriesAdded = []*github.Repository{}
		ev.RepositoriesRemoved = s.installationRepoSummaries(rps)
	}
	done := s.hooks.enqueueLocked("installation_repositories", ev, inst)
	s.mu.Unlock()
	<-done
}

// SuspendInstallation suspends the installation (tokens stop working, no new ones) and
// fires installation "suspend".
func (s *Server) SuspendInstallation(t TB, installationID int64) {
	t.Helper()
	s.installationAction(t, installationID, "suspend", func(inst *installation, now time.Time) {
		inst.suspendedAt = &now
	})
}

// UnsuspendInstallation lifts a suspension and fires installation "unsuspend".
func (s *Server) UnsuspendInstallation(t TB, installationID int64) {
	t.Helper()
	s.installationAction(t, installationID, "unsuspend", func(inst *installation, _ time.Time) {
		inst.suspendedAt = nil
	})
}

// DeleteInstallation uninstalls the App (tokens are revoked) and fires installation
// "deleted".
func (s *Server) DeleteInstallation(t TB, installationID int64) {
	t.Helper()
	s.installationAction(t, installationID, "deleted", func(inst *installation, _ time.Time) {
		inst.deleted = true
	})
}

// AcceptNewPermissions sets the installation's permissions, as an owner accepting the
// App's new permission request does, and fires installation "new_permissions_accepted".
func (s *Server) AcceptNewPermissions(t TB, installationID int64, perms map[string]string) {
	t.Helper()
	s.installationAction(t, installationID, "new_permissions_accepted", func(inst *installation, _ time.Time) {
		inst.permissions = copyPerms(perms)
	})
}

func (s *Server) installationAction(t TB, id int64, action string, change func(*installation, time.Time)) {
	t.Helper()
	s.mu.Lock()
	inst, ok := s.installations[id]
	if !ok || inst.deleted {
		s.mu.Unlock()
		t.Fatalf("installation %d not found", id)
	}
	now := s.clock.Now()
	change(inst, now)
	inst.updatedAt = now
	p := s.installationEventLocked(inst, action, s.accountLocked("octocat", "User"))
	if action == "deleted" {
		p.Repositories = s.installationRepoSummaries(s.installationReposLocked(inst))
	}
	done := s.hooks.enqueueLocked("installation", p, inst)
	s.mu.Unlock()
	<-done
}

func (s *Server) installationEventLocked(inst *installation, action string, sender *account) *github.InstallationEvent {
	return &github.InstallationEvent{
		Action:       ptr(action),
		Installation: s.installationJSON(inst),
		Sender:       s.userJSON(sender),
	}
}

// InstallationToken mints a token directly (no HTTP request is counted), narrowed to
// repos and perms when they are given; it is what an access_tokens call would return.
func (s *Server) InstallationToken(t TB, installationID int64, repos []string, perms map[string]string) secret.Secret {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	inst, ok := s.installations[installationID]
	if !ok || inst.deleted {
		t.Fatalf("installation %d not found", installationID)
	}
	tok, msg := s.issueTokenLocked(inst, tokenRequest{Repositories: repos, Permissions: perms})
	if tok == nil {
		t.Fatalf("mint installation token: %s", msg)
	}
	return secret.New(tok.value)
}

func (s *Server) sortedInstallationsLocked() []*installation {
	out := make([]*installation, 0, len(s.installations))
	for _, inst := range s.installations {
		out = append(out, inst)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (s *Server) installationReposLocked(inst *installation) []*repo {
	var out []*repo
	for _, rp := range s.sortedReposLocked() {
		if inst.repoIDs[rp.id] {
			out = append(out, rp)
		}
	}
	return out
}

// installationForRepoLocked is the active installation that can see the repository:
// the one whose events about it reach the App.
func (s *Server) installationForRepoLocked(rp *repo) *installation {
	for _, inst := range s.sortedInstallationsLocked() {
		if !inst.deleted && inst.suspendedAt == nil && inst.repoIDs[rp.id] {
			return inst
		}
	}
	return nil
}

func (s *Server) appRoutes() []route {
	return []route{
		{pattern: "GET /app", doc: "/apps/apps#get-the-authenticated-app", handler: s.handleGetApp},
		{pattern: "GET /app/installations", doc: "/apps/apps#list-installations-for-the-authenticated-app", handler: s.handleListInstallations},
		{pattern: "GET /app/installations/{installation_id}", doc: "/apps/apps#get-an-installation-for-the-authenticated-app", handler: s.handleGetInstallation},
		{pattern: "POST /app/installations/{installation_id}/access_tokens", doc: "/apps/apps#create-an-installation-access-token-for-an-app", handler: s.handleCreateToken},
		{pattern: "GET /repos/{owner}/{repo}/installation", doc: "/apps/apps#get-a-repository-installation-for-the-authenticated-app", handler: s.handleGetRepoInstallation},
		{pattern: "GET /installation/repositories", doc: "/apps/installations#list-repositories-accessible-to-the-app-installation", handler: s.handleInstallationRepos},
		{pattern: "DELETE /installation/token", doc: "/apps/installations#revoke-an-installation-access-token", handler: s.handleRevokeToken},
	}
}

func (s *Server) handleGetApp(w http.ResponseWriter, r *http.Request) {
	if !s.requireAppJWT(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	created := s.clock.Now().Add(-24 * time.Hour)
	count := 0
	for _, inst := range s.installations {
		if !inst.deleted {
			count++
		}
	}
	writeJSON(w, http.StatusOK, &github.App{
		ID:                 ptr(appID),
		Slug:               ptr(appSlug),
		NodeID:             ptr(nodeID("App", appID)),
		Owner:              s.userJSON(s.accountLocked("kukie", "Organization")),
		Name:               ptr(appName),
		Description:        ptr("GitOps changes as verified pull requests"),
		ExternalURL:        ptr("https://kukie.example"),
		HTMLURL:            ptr(s.htmlURL("apps/%s", appSlug)),
		CreatedAt:          ts(created),
		UpdatedAt:          ts(created),
		Permissions:        permissionsJSON(DefaultPermissions()),
		Events:             append([]string(nil), s.app.events...),
		InstallationsCount: ptr(count),
	})
}

func (s *Server) handleListInstallations(w http.ResponseWriter, r *http.Request) {
	if !s.requireAppJWT(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*github.Installation
	for _, inst := range s.sortedInstallationsLocked() {
		if !inst.deleted {
			out = append(out, s.installationJSON(inst))
		}
	}
	start, end := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, nonNil(out[start:end]))
}

func (s *Server) handleGetInstallation(w http.ResponseWriter, r *http.Request) {
	if !s.requireAppJWT(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	inst := s.installationFromPath(w, r)
	if inst == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.installationJSON(inst))
}

func (s *Server) handleGetRepoInstallation(w http.ResponseWriter, r *http.Request) {
	if !s.requireAppJWT(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repoFromPath(r)
	if rp == nil {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	for _, inst := range s.sortedInstallationsLocked() {
		if !inst.deleted && inst.repoIDs[rp.id] {
			writeJSON(w, http.StatusOK, s.installationJSON(inst))
			return
		}
	}
	writeError(w, r, http.StatusNotFound, "Not Found")
}

// installationFromPath finds the live installation the path's {installation_id}
// names, or answers 404 and returns nil.
func (s *Server) installationFromPath(w http.ResponseWriter, r *http.Request) *installation {
	var inst *installation
	if id, err := strconv.ParseInt(r.PathValue("installation_id"), 10, 64); err == nil {
		if i, ok := s.installations[id]; ok && !i.deleted {
			inst = i
		}
	}
	return found(w, r, inst)
}

// tokenRequest is the body of POST /app/installations/{id}/access_tokens.
type tokenRequest struct {
	Repositories  []string          `json:"repositories"`
	RepositoryIDs []int64           `json:"repository_ids"`
	Permissions   map[string]string `json:"permissions"`
}

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request) {
	if !s.requireAppJWT(w, r) {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, r, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	var req tokenRequest
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, r, http.StatusBadRequest, "Problems parsing JSON")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	inst := s.installationFromPath(w, r)
	if inst == nil {
		return
	}
	if inst.suspendedAt != nil {
		writeError(w, r, http.StatusForbidden, "This installation has been suspended")
		return
	}
	tok, msg := s.issueTokenLocked(inst, req)
	if tok == nil {
		writeError(w, r, http.StatusUnprocessableEntity, msg)
		return
	}
	out := &github.InstallationToken{
		Token:       ptr(tok.value),
		ExpiresAt:   ts(tok.expiresAt),
		Permissions: permissionsJSON(tok.permissions),
	}
	var rps []*repo
	if tok.repoIDs != nil {
		for _, rp := range s.installationReposLocked(inst) {
			if tok.repoIDs[rp.id] {
				rps = append(rps, rp)
			}
		}
	} else {
		rps = s.installationReposLocked(inst)
	}
	for _, rp := range rps {
		out.Repositories = append(out.Repositories, s.repoJSON(rp))
	}
	writeJSON(w, http.StatusCreated, struct {
		*github.InstallationToken
		RepositorySelection string `json:"repository_selection"`
	}{out, "selected"})
}

// issueTokenLocked validates a token request against the installation and mints the
// token; on refusal it returns GitHub's message.
func (s *Server) issueTokenLocked(inst *installation, req tokenRequest) (*installationToken, string) {
	const notAccessible = "There is at least one repository that does not exist or is not accessible to the parent installation."
	tok := &installationToken{inst: inst, expiresAt: s.clock.Now().Add(tokenLifetime)}
	if len(req.Repositories) > 0 || len(req.RepositoryIDs) > 0 {
		tok.repoIDs = map[int64]bool{}
		for _, name := range req.Repositories {
			rp := s.repos[strings.ToLower(inst.account.login+"/"+name)]
			if strings.Contains(name, "/") || rp == nil || !inst.repoIDs[rp.id] {
				return nil, notAccessible
			}
			tok.repoIDs[rp.id] = true
		}
		for _, id := range req.RepositoryIDs {
			if !inst.repoIDs[id] {
				return nil, notAccessible
			}
			tok.repoIDs[id] = true
		}
	}
	if len(req.Permissions) > 0 {
		tok.permissions = map[string]string{"metadata": PermRead}
		for name, level := range req.Permissions {
			granted, ok := inst.permissions[name]
			if _, known := permLevels[level]; !known || !ok || permLevels[level] > permLevels[granted] {
				return nil, "The permissions requested are not granted to this installation."
			}
			tok.permissions[name] = level
		}
	} else {
		tok.permissions = copyPerms(inst.permissions)
	}
	value, err := randomAlnum(36)
	if err != nil {
		return nil, fmt.Sprintf("generate token: %v", err)
	}
	tok.value = "ghs_" + value
	s.tokens[tok.value] = tok
	return tok, ""
}

func (s *Server) handleInstallationRepos(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := s.requireInstallationTokenLocked(w, r)
	if tok == nil {
		return
	}
	var out []*github.Repository
	for _, rp := range s.installationReposLocked(tok.inst) {
		if tok.repoIDs == nil || tok.repoIDs[rp.id] {
			out = append(out, s.repoJSON(rp))
		}
	}
	total := len(out)
	start, end := paginate(w, r, total)
	writeJSON(w, http.StatusOK, map[string]any{
		"total_count":          total,
		"repository_selection": "selected",
		"repositories":         nonNil(out[start:end]),
	})
}

func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := s.requireInstallationTokenLocked(w, r)
	if tok == nil {
		return
	}
	delete(s.tokens, tok.value)
	w.WriteHeader(http.StatusNoContent)
}

// credentials returns the bearer value of the Authorization header ("Bearer x",
// "token x", or the password of Basic auth as git uses it).
func credentials(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if h == "" {
		return ""
	}
	if _, pass, ok := r.BasicAuth(); ok {
		return pass
	}
	scheme, value, ok := strings.Cut(h, " ")
	if !ok {
		return h
	}
	switch strings.ToLower(scheme) {
	case "bearer", "token":
		return strings.TrimSpace(value)
	}
	return h
}

func isJWT(v string) bool { return strings.Count(v, ".") == 2 }

// requireAppJWT verifies an App JWT the way GitHub does and answers 401 otherwise.
func (s *Server) requireAppJWT(w http.ResponseWriter, r *http.Request) bool {
	raw := credentials(r)
	if raw == "" {
		writeError(w, r, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return false
	}
	if !isJWT(raw) {
		writeError(w, r, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return false
	}
	if msg := s.verifyJWT(raw, time.Now()); msg != "" {
		writeError(w, r, http.StatusUnauthorized, msg)
		return false
	}
	return true
}

// verifyJWT checks signature (RS256 with the App key), issuer and times; it returns
// GitHub's message for the first problem, or "".
func (s *Server) verifyJWT(raw string, now time.Time) string {
	claims := jwt.MapClaims{}
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithJSONNumber(), jwt.WithoutClaimsValidation())
	_, err := parser.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) {
		return &s.app.key.PublicKey, nil
	})
	if err != nil {
		return "A JSON web token could not be decoded"
	}
	iss, ok := claims["iss"]
	if !ok || fmt.Sprint(iss) != strconv.FormatInt(appID, 10) {
		return "'Issuer' claim ('iss') must be an Integer"
	}
	iat, iatErr := numericClaim(claims, "iat")
	exp, expErr := numericClaim(claims, "exp")
	switch {
	case iatErr != nil:
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	case expErr != nil:
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	case iat.After(now.Add(jwtClockSkew)):
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	case !exp.After(now):
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	case exp.Sub(iat) > maxJWTLifetime || exp.After(now.Add(maxJWTLifetime+jwtClockSkew)):
		return "'Expiration time' claim ('exp') is too far in the future"
	}
	return ""
}

func numericClaim(c jwt.MapClaims, name string) (time.Time, error) {
	n, ok := c[name].(json.Number)
	if !ok {
		return time.Time{}, fmt.Errorf("claim %s is not a number", name)
	}
	v, err := n.Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("claim %s is not an integer: %w", name, err)
	}
	return time.Unix(v, 0), nil
}

// lookupTokenLocked resolves an installation token. It returns the token and 0, or
// nil and the HTTP status GitHub would answer.
func (s *Server) lookupTokenLocked(raw string) (*installationToken, int, string) {
	tok, ok := s.tokens[raw]
	if !ok || !s.clock.Now().Before(tok.expiresAt) || tok.inst.deleted {
		return nil, http.StatusUnauthorized, "Bad credentials"
	}
	if tok.inst.suspendedAt != nil {
		return nil, http.StatusForbidden, "This installation has been suspended"
	}
	return tok, 0, ""
}

func (s *Server) requireInstallationTokenLocked(w http.ResponseWriter, r *http.Request) *installationToken {
	raw := credentials(r)
	if raw == "" {
		writeError(w, r, http.StatusUnauthorized, "Requires authentication")
		return nil
	}
	if isJWT(raw) {
		writeError(w, r, http.StatusForbidden, "Resource not accessible by integration")
		return nil
	}
	tok, status, msg := s.lookupTokenLocked(raw)
	if tok == nil {
		writeError(w, r, status, msg)
	}
	return tok
}

// access describes what an endpoint needs: a permission (any of several, as for issue
// comments that either "issues" or "pull_requests" grants) at a level.
type access struct {
	perms []string
	level string
}

func need(level string, perms ...string) access { return access{perms: perms, level: level} }

// authorizeRepoLocked finds the repository named in the path and checks the caller may
// use it as the endpoint needs. On refusal it has answered as GitHub does (401 bad or
// expired credentials, 404 for a repository the caller cannot see, 403 for a missing
// permission) and returns nil.
func (s *Server) authorizeRepoLocked(w http.ResponseWriter, r *http.Request, a access) *repo {
	raw := credentials(r)
	var tok *installationToken
	switch {
	case raw == "":
	case isJWT(raw):
		if msg := s.verifyJWT(raw, time.Now()); msg != "" {
			writeError(w, r, http.StatusUnauthorized, msg)
			return nil
		}
		writeError(w, r, http.StatusForbidden, "Resource not accessible by integration")
		return nil
	case s.userOfTokenLocked(raw) != nil:
		// A person's token reaches only what they and the App both can, and GitHub
		// answers a repository either cannot see as missing. Writes with a user token
		// are not modelled.
		rp := s.repoFromPath(r)
		if rp == nil || !s.userCanReadLocked(s.userOfTokenLocked(raw), rp) {
			writeError(w, r, http.StatusNotFound, "Not Found")
			return nil
		}
		if a.level != PermRead {
			writeError(w, r, http.StatusForbidden, "Resource not accessible by integration")
			return nil
		}
		return rp
	default:
		var status int
		var msg string
		tok, status, msg = s.lookupTokenLocked(raw)
		if tok == nil {
			writeError(w, r, status, msg)
			return nil
		}
	}
	rp := s.repoFromPath(r)
	if rp == nil {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return nil
	}
	if tok == nil {
		if rp.private {
			writeError(w, r, http.StatusNotFound, "Not Found")
			return nil
		}
		if a.level != PermRead {
			writeError(w, r, http.StatusUnauthorized, "Requires authentication")
			return nil
		}
		return rp
	}
	if !tok.inst.repoIDs[rp.id] || (tok.repoIDs != nil && !tok.repoIDs[rp.id]) {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return nil
	}
	for _, p := range a.perms {
		if permLevels[tok.permissions[p]] >= permLevels[a.level] {
			return rp
		}
	}
	writeError(w, r, http.StatusForbidden, "Resource not accessible by integration")
	return nil
}

// repoHandler answers a request on one repository: s.mu is held and the caller has
// been authorized for the endpoint's access.
type repoHandler func(w http.ResponseWriter, r *http.Request, rp *repo)

// onRepo serves h with s.mu held, once the caller is authorized for a on the
// repository the path names; otherwise authorizeRepoLocked has answered.
func (s *Server) onRepo(a access, h repoHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if rp := s.authorizeRepoLocked(w, r, a); rp != nil {
			h(w, r, rp)
		}
	}
}

// onRepoWithBody decodes the JSON request body into a new Req (GitHub's 400 when it
// is malformed), then serves h like onRepo.
func onRepoWithBody[Req any](s *Server, a access, h func(w http.ResponseWriter, r *http.Request, rp *repo, req *Req)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if !decodeBody(w, r, &req) {
			return
		}
		s.onRepo(a, func(w http.ResponseWriter, r *http.Request, rp *repo) { h(w, r, rp, &req) })(w, r)
	}
}

func copyPerms(p map[string]string) map[string]string {
	out := make(map[string]string, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

func permissionsJSON(p map[string]string) *github.InstallationPermissions {
	b, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	var out github.InstallationPermissions
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return &out
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randomAlnum(n int) (string, error) {
	b := make([]byte, n)
	for i := range b {
		v, err := rand.Int(rand.Reader, big.NewInt(int64(len(alnum))))
		if err != nil {
			return "", err
		}
		b[i] = alnum[v.Int64()]
	}
	return string(b), nil
}

func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", b), nil
}

var errNotFound = errors.New("not found")
