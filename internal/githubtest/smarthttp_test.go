package githubtest

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCloneOverSmartHTTP(t *testing.T) {
	s := New(t)
	s.CreateRepo(t, "acme", "deploy", map[string]string{"apps/web/deployment.yaml": "replicas: 1\n"}, "main")
	s.CreateRepo(t, "acme", "other", map[string]string{"x": "1"}, "main")
	id := s.CreateInstallation(t, "acme", "deploy", "other")
	head := s.PushCommit(t, "acme/deploy", "main", map[string]string{"apps/web/deployment.yaml": "replicas: 2\n"}, DefaultAuthor)

	withToken := func(token string) string {
		u, err := url.Parse(s.CloneURL("acme/deploy"))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword("x-access-token", token)
		return u.String()
	}
	clone := func(t *testing.T, src string) (string, error) {
		dst := filepath.Join(t.TempDir(), "clone")
		cmd := exec.Command("git", "clone", "--quiet", src, dst)
		cmd.Env = append(gitEnv(t.TempDir()), "GIT_TERMINAL_PROMPT=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), err
		}
		return dst, nil
	}

	t.Run("with an installation token", func(t *testing.T) {
		dst, err := clone(t, withToken(s.InstallationToken(t, id, []string{"deploy"}, map[string]string{"contents": PermRead}).Reveal()))
		if err != nil {
			t.Fatalf("clone: %v\n%s", err, dst)
		}
		if got := gitOut(t, dst, "rev-parse", "HEAD"); got != head {
			t.Errorf("cloned HEAD = %s, want %s", got, head)
		}
		b, err := os.ReadFile(filepath.Join(dst, "apps/web/deployment.yaml"))
		if err != nil || string(b) != "replicas: 2\n" {
			t.Errorf("cloned file = %q, %v", b, err)
		}
	})
	t.Run("private repository without credentials", func(t *testing.T) {
		if out, err := clone(t, s.CloneURL("acme/deploy")); err == nil {
			t.Fatalf("anonymous clone of a private repository succeeded")
		} else if !strings.Contains(out, "401") && !strings.Contains(out, "Authentication failed") && !strings.Contains(out, "could not read Username") {
			t.Errorf("unexpected failure: %s", out)
		}
	})
	t.Run("token scoped to another repository", func(t *testing.T) {
		if _, err := clone(t, withToken(s.InstallationToken(t, id, []string{"other"}, nil).Reveal())); err == nil {
			t.Fatalf("clone with a token for another repository succeeded")
		}
	})
	t.Run("public repository without credentials", func(t *testing.T) {
		s.SetPrivate(t, "acme/deploy", false)
		defer s.SetPrivate(t, "acme/deploy", true)
		if out, err := clone(t, s.CloneURL("acme/deploy")); err != nil {
			t.Fatalf("anonymous clone of a public repository: %v\n%s", err, out)
		}
	})
}
