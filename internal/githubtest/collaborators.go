package githubtest

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"
)

// Repository roles a person can hold, as GitHub names them. The collaborator
// permission endpoint answers with the role's base permission (maintain counts as
// write, triage as read) and the role itself in role_name.
const (
	RoleAdmin    = "admin"
	RoleMaintain = "maintain"
	RoleWrite    = "write"
	RoleTriage   = "triage"
	RoleRead     = "read"
	// RoleNone removes a person's access.
	RoleNone = "none"
)

// roleFacts is what each role means: its base permission and the flags GitHub puts
// in user.permissions.
var roleFacts = map[string]struct {
	permission string
	flags      map[string]bool
}{
	RoleAdmin:    {"admin", map[string]bool{"admin": true, "maintain": true, "push": true, "triage": true, "pull": true}},
	RoleMaintain: {"write", map[string]bool{"admin": false, "maintain": true, "push": true, "triage": true, "pull": true}},
	RoleWrite:    {"write", map[string]bool{"admin": false, "maintain": false, "push": true, "triage": true, "pull": true}},
	RoleTriage:   {"read", map[string]bool{"admin": false, "maintain": false, "push": false, "triage": true, "pull": true}},
	RoleRead:     {"read", map[string]bool{"admin": false, "maintain": false, "push": false, "triage": false, "pull": true}},
	RoleNone:     {"none", map[string]bool{"admin": false, "maintain": false, "push": false, "triage": false, "pull": false}},
}

// readCollaborators: GitHub documents the permission endpoint under the "Metadata"
// repository permission (read), which every installation has.
var readCollaborators = need(PermRead, "metadata")

func (s *Server) collaboratorRoutes() []route {
	return []route{
		{pattern: "GET /repos/{owner}/{repo}/collaborators/{username}/permission",
			doc: "/collaborators/collaborators#get-repository-permissions-for-a-user", handler: s.onRepo(readCollaborators, s.handleCollaboratorPermission)},
	}
}

// SetPermission gives the person login (a user account, created when new) a role on
// the repository ("owner/name"): RoleAdmin, RoleMaintain, RoleWrite, RoleTriage,
// RoleRead, or RoleNone to take the role away.
//
// Without a role, a person who owns the repository's account is admin; anyone else
// who exists has no access to a private repository ("none") and read access to a
// public one, as on GitHub. A login that no account has is answered with 404 "<login>
// is not a user". Organization membership and teams are not modelled: give a role.
func (s *Server) SetPermission(t TB, repoName, login, role string) {
	t.Helper()
	if _, ok := roleFacts[role]; !ok {
		t.Fatalf("set permission of %s on %s: unknown role %q", login, repoName, role)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepoLocked(t, repoName)
	user := s.accountLocked(login, "User")
	if user.kind != "User" {
		t.Fatalf("set permission of %s on %s: %s is a %s, not a user", login, repoName, login, user.kind)
	}
	if rp.roles == nil {
		rp.roles = map[int64]string{}
	}
	if role == RoleNone {
		delete(rp.roles, user.id)
		return
	}
	rp.roles[user.id] = role
}

// roleLocked is the role user holds on rp.
func (rp *repo) roleLocked(user *account) string {
	if role, ok := rp.roles[user.id]; ok {
		return role
	}
	switch {
	case user == rp.owner:
		return RoleAdmin
	case rp.private:
		return RoleNone
	}
	// Everyone may read a public repository.
	return RoleRead
}

func (s *Server) handleCollaboratorPermission(w http.ResponseWriter, r *http.Request, rp *repo) {
	login := r.PathValue("username")
	user, ok := s.accounts[strings.ToLower(login)]
	if !ok || user.kind == "Organization" {
		writeError(w, r, http.StatusNotFound, fmt.Sprintf("%s is not a user", login))
		return
	}
	role := rp.roleLocked(user)
	facts := roleFacts[role]
	u := s.userJSON(user)
	u.Permissions = facts.flags
	u.RoleName = ptr(role)
	writeJSON(w, http.StatusOK, permissionLevel{Permission: facts.permission, RoleName: role, User: u})
}

// permissionLevel is the endpoint's answer. go-github's RepositoryPermissionLevel
// lacks role_name, which GitHub sends.
type permissionLevel struct {
	Permission string       `json:"permission"`
	RoleName   string       `json:"role_name"`
	User       *github.User `json:"user"`
}
