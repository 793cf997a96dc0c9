package githubtest

import (
	"net/http"
	"net/http/cgi"
	"os/exec"
	"strings"
)

// smartHTTPRoutes serve clones and fetches (never pushes) over git's smart HTTP
// protocol through `git http-backend`, with GitHub's authentication: a private
// repository needs an installation token with contents:read as the Basic password
// (user "x-access-token").
func (s *Server) smartHTTPRoutes() []route {
	return []route{
		{pattern: "GET /{owner}/{repo}/info/refs", doc: "", handler: s.handleGitHTTP},
		{pattern: "POST /{owner}/{repo}/git-upload-pack", doc: "", handler: s.handleGitHTTP},
	}
}

func (s *Server) handleGitHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") != "git-upload-pack" {
		http.Error(w, "only git-upload-pack is served", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	rp := s.repoFromPath(r)
	if rp == nil {
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	if raw := credentials(r); raw != "" || rp.private {
		tok, _, _ := s.lookupTokenLocked(raw)
		if raw == "" || tok == nil || !tok.inst.repoIDs[rp.id] || (tok.repoIDs != nil && !tok.repoIDs[rp.id]) ||
			permLevels[tok.permissions["contents"]] < permLevels[PermRead] {
			s.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
			return
		}
	}
	gitPath := strings.TrimPrefix(rp.path, s.dir)
	s.mu.Unlock()

	bin, err := exec.LookPath("git")
	if err != nil {
		http.Error(w, "git is not installed", http.StatusInternalServerError)
		return
	}
	// Rewrite to the on-disk spelling: GitHub's paths are case-insensitive and ".git"
	// is optional, the backend's are neither.
	r2 := r.Clone(r.Context())
	u := *r.URL
	u.Path = gitPath + "/git-upload-pack"
	if strings.HasSuffix(r.URL.Path, "/info/refs") {
		u.Path = gitPath + "/info/refs"
	}
	u.RawPath = ""
	r2.URL = &u
	h := &cgi.Handler{
		Path: bin,
		Args: []string{"http-backend"},
		Env: append(gitEnv(s.dir),
			"GIT_PROJECT_ROOT="+s.dir,
			"GIT_HTTP_EXPORT_ALL=1",
		),
	}
	h.ServeHTTP(w, r2)
}
