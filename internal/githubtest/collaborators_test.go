package githubtest

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

func TestCollaboratorPermission(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"README.md": "hi\n"})
	s.CreateRepo(t, "acme", "other", nil, "main")
	for login, role := range map[string]string{
		"ada": RoleAdmin, "max": RoleMaintain, "wes": RoleWrite, "tia": RoleTriage, "rex": RoleRead,
	} {
		s.SetPermission(t, "acme/deploy", login, role)
	}
	s.SetPermission(t, "acme/deploy", "gone", RoleWrite)
	s.SetPermission(t, "acme/deploy", "gone", RoleNone)
	s.SetPermission(t, "acme/other", "nobody", RoleWrite) // exists, but has no role on acme/deploy

	cases := map[string]struct {
		login          string
		wantPermission string
		wantRole       string
		wantPush       bool
	}{
		"admin":                       {"ada", "admin", "admin", true},
		"maintain counts as write":    {"max", "write", "maintain", true},
		"write":                       {"wes", "write", "write", true},
		"triage counts as read":       {"tia", "read", "triage", false},
		"read":                        {"rex", "read", "read", false},
		"role taken away":             {"gone", "none", "none", false},
		"user without a role":         {"nobody", "none", "none", false},
		"login spelt in another case": {"WES", "write", "write", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "deploy", tc.login)
			if err != nil {
				t.Fatal(err)
			}
			if got.GetPermission() != tc.wantPermission {
				t.Errorf("permission = %q, want %q", got.GetPermission(), tc.wantPermission)
			}
			if got.GetUser().GetRoleName() != tc.wantRole || got.GetUser().GetPermissions()["push"] != tc.wantPush {
				t.Errorf("user role %q push %v, want %q %v", got.GetUser().GetRoleName(), got.GetUser().GetPermissions()["push"], tc.wantRole, tc.wantPush)
			}
			if got.GetUser().GetType() != "User" || got.GetUser().GetLogin() == "" {
				t.Errorf("user = %+v", got.GetUser())
			}
		})
	}

	t.Run("role_name at the top level", func(t *testing.T) {
		req, err := c.NewRequest("GET", "repos/acme/deploy/collaborators/max/permission", nil)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if _, err := c.Do(ctx, req, &raw); err != nil {
			t.Fatal(err)
		}
		if raw["role_name"] != "maintain" || raw["permission"] != "write" {
			t.Errorf("answer = %v, want permission write and role_name maintain", raw)
		}
	})

	t.Run("unknown login is not a user", func(t *testing.T) {
		_, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "deploy", "no-such-person")
		if er := wantStatus(t, err, http.StatusNotFound); er.Message != "no-such-person is not a user" {
			t.Errorf("message = %q", er.Message)
		}
	})

	t.Run("an organization is not a user", func(t *testing.T) {
		_, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "deploy", "acme")
		wantStatus(t, err, http.StatusNotFound)
	})

	t.Run("a repository outside the installation is not found", func(t *testing.T) {
		_, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "other", "nobody")
		wantStatus(t, err, http.StatusNotFound)
	})

	t.Run("public repositories are readable by everyone", func(t *testing.T) {
		s.SetPrivate(t, "acme/deploy", false)
		defer s.SetPrivate(t, "acme/deploy", true)
		got, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "deploy", "nobody")
		if err != nil || got.GetPermission() != "read" {
			t.Fatalf("= %q, %v; want read", got.GetPermission(), err)
		}
		got, _, err = c.Repositories.GetPermissionLevel(ctx, "acme", "deploy", "wes")
		if err != nil || got.GetPermission() != "write" {
			t.Fatalf("writer on a public repository = %q, %v; want write", got.GetPermission(), err)
		}
	})

	t.Run("anonymous caller on a private repository", func(t *testing.T) {
		res, err := s.Client().Get(s.URL() + "/repos/acme/deploy/collaborators/wes/permission")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		var e apiError
		if res.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Message != "Not Found" {
			t.Errorf("anonymous read of a private repository = %d %s, want 404", res.StatusCode, body)
		}
	})

	if n := s.RequestCount("GET /repos/{owner}/{repo}/collaborators/{username}/permission"); n == 0 {
		t.Error("requests were not counted under the endpoint")
	}
}
