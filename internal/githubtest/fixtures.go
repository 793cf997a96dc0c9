package githubtest

import (
	"os"
	"path/filepath"

	"github.com/kukie/kukie-gitops/internal/moduleroot"
)

// FixtureDir is where webhook payload fixtures live, relative to the module root.
const FixtureDir = "testdata/webhooks"

// Fixture returns the payload testdata/webhooks/<event>/<name>.json from the module
// root, found by walking up from the test's working directory to go.mod.
func Fixture(t TB, event, name string) []byte {
	t.Helper()
	root, err := moduleroot.Find()
	if err != nil {
		t.Fatalf("find module root: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(root, FixtureDir, event, name+".json"))
	if err != nil {
		t.Fatalf("read webhook fixture %s/%s: %v", event, name, err)
	}
	return b
}
