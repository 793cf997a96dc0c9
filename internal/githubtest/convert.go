package githubtest

import (
	"encoding/base64"
	"fmt"
	"time"

	"github.com/google/go-github/v62/github"
)

// The fake answers with go-github's types so that every answer is, by construction,
// something go-github parses; field names are GitHub's JSON names.

func ptr[T any](v T) *T { return &v }

func ts(t time.Time) *github.Timestamp { return &github.Timestamp{Time: t} }

func nodeID(kind string, id int64) string {
	return base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("0:%s%d", kind, id)))
}

// nonNil makes an empty list encode as [] rather than null, as GitHub's lists do.
func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

func (s *Server) userJSON(a *account) *github.User {
	if a == nil {
		return nil
	}
	u := &github.User{
		Login:     ptr(a.login),
		ID:        ptr(a.id),
		NodeID:    ptr(nodeID(a.kind, a.id)),
		AvatarURL: ptr(s.htmlURL("avatars/%s", a.login)),
		URL:       ptr(s.apiURL("users/%s", a.login)),
		HTMLURL:   ptr(s.htmlURL("%s", a.login)),
		Type:      ptr(a.kind),
		SiteAdmin: ptr(false),
	}
	return u
}

func (s *Server) repoJSON(rp *repo) *github.Repository {
	full := rp.fullName()
	visibility := "private"
	if !rp.private {
		visibility = "public"
	}
	return &github.Repository{
		ID:            ptr(rp.id),
		NodeID:        ptr(nodeID("Repository", rp.id)),
		Name:          ptr(rp.name),
		FullName:      ptr(full),
		Owner:         s.userJSON(rp.owner),
		Private:       ptr(rp.private),
		Visibility:    ptr(visibility),
		Description:   ptr(""),
		Fork:          ptr(false),
		Archived:      ptr(false),
		Disabled:      ptr(false),
		URL:           ptr(s.apiURL("repos/%s", full)),
		HTMLURL:       ptr(s.htmlURL("%s", full)),
		CloneURL:      ptr(s.cloneURL(rp)),
		GitURL:        ptr(s.cloneURL(rp)),
		SSHURL:        ptr(fmt.Sprintf("git@%s:%s.git", s.srv.Listener.Addr().String(), full)),
		DefaultBranch: ptr(rp.defaultBranch),
		CreatedAt:     ts(rp.createdAt),
		UpdatedAt:     ts(rp.pushedAt),
		PushedAt:      ts(rp.pushedAt),
	}
}

// installationRepoSummaries is the short repository form installation events carry.
func (s *Server) installationRepoSummaries(rps []*repo) []*github.Repository {
	out := []*github.Repository{}
	for _, rp := range rps {
		out = append(out, &github.Repository{
			ID:       ptr(rp.id),
			NodeID:   ptr(nodeID("Repository", rp.id)),
			Name:     ptr(rp.name),
			FullName: ptr(rp.fullName()),
			Private:  ptr(rp.private),
		})
	}
	return out
}

func (s *Server) installationJSON(inst *installation) *github.Installation {
	out := &github.Installation{
		ID:                  ptr(inst.id),
		NodeID:              ptr(nodeID("Installation", inst.id)),
		AppID:               ptr(appID),
		AppSlug:             ptr(appSlug),
		TargetID:            ptr(inst.account.id),
		Account:             s.userJSON(inst.account),
		AccessTokensURL:     ptr(s.apiURL("app/installations/%d/access_tokens", inst.id)),
		RepositoriesURL:     ptr(s.apiURL("installation/repositories")),
		HTMLURL:             ptr(s.htmlURL("organizations/%s/settings/installations/%d", inst.account.login, inst.id)),
		TargetType:          ptr(inst.account.kind),
		RepositorySelection: ptr("selected"),
		Events:              append([]string{}, inst.events...),
		Permissions:         permissionsJSON(inst.permissions),
		CreatedAt:           ts(inst.createdAt),
		UpdatedAt:           ts(inst.updatedAt),
	}
	if inst.suspendedAt != nil {
		out.SuspendedAt = ts(*inst.suspendedAt)
		out.SuspendedBy = s.userJSON(s.accounts["octocat"])
	}
	return out
}
