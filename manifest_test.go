package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/kukie/kukie-gitops/web"
)

// The App's permissions and events, as the service needs them. app.yml and the
// README's tables must both say exactly this.
var (
	wantPermissions = map[string]string{"contents": "write", "pull_requests": "write", "checks": "write", "metadata": "read", "merge_queues": "read"}
	// GitHub delivers these to every App and rejects manifests that list them.
	implicitEvents   = []string{"installation", "installation_repositories"}
	subscribedEvents = []string{"pull_request", "check_run", "check_suite", "merge_group", "push", "issue_comment"}
)

func TestAppManifestMatchesTheService(t *testing.T) {
	raw, err := os.ReadFile("app.yml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Name           string            `yaml:"name"`
		URL            string            `yaml:"url"`
		HookAttributes map[string]any    `yaml:"hook_attributes"`
		SetupURL       string            `yaml:"setup_url"`
		CallbackURLs   []string          `yaml:"callback_urls"`
		Permissions    map[string]string `yaml:"default_permissions"`
		Events         []string          `yaml:"default_events"`
	}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("app.yml: %v", err)
	}
	if len(m.Permissions) != len(wantPermissions) {
		t.Errorf("permissions %v, want exactly %v", m.Permissions, wantPermissions)
	}
	for p, access := range wantPermissions {
		if m.Permissions[p] != access {
			t.Errorf("permission %s = %q, want %q", p, m.Permissions[p], access)
		}
	}
	if strings.Join(m.Events, ",") != strings.Join(subscribedEvents, ",") {
		t.Errorf("default_events %v, want %v", m.Events, subscribedEvents)
	}
	if !strings.HasSuffix(m.HookAttributes["url"].(string), "/webhooks/github") || !strings.HasSuffix(m.SetupURL, "/github/setup") {
		t.Errorf("webhook url %v / setup url %q do not point at the service's routes", m.HookAttributes["url"], m.SetupURL)
	}
	if !slices.ContainsFunc(m.CallbackURLs, func(u string) bool { return strings.HasSuffix(u, web.CallbackPath) }) {
		t.Errorf("callback_urls %v lack the change page's sign-in callback %s", m.CallbackURLs, web.CallbackPath)
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for p, access := range wantPermissions {
		if !regexp.MustCompile(`(?m)^\| ` + p + ` \| ` + access + ` \|`).Match(readme) {
			t.Errorf("README lacks the permission row %s | %s", p, access)
		}
	}
	for _, e := range append(append([]string{}, implicitEvents...), subscribedEvents...) {
		if !regexp.MustCompile(`(?m)^\| ` + e + ` \|`).Match(readme) {
			t.Errorf("README lacks the event row %s", e)
		}
	}
}
