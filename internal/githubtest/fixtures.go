package githubtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FixtureDir is where webhook payload fixtures live, relative to the module root.
const FixtureDir = "testdata/webhooks"

// Fixture returns the payload testdata/webhooks/<event>/<name>.json from the module
// root, found by walking up from the test's working directory to go.mod.
func Fixture(t testing.TB, event, name string) []byte {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("find module root: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(root, FixtureDir, event, name+".json"))
	if err != nil {
		t.Fatalf("read webhook fixture %s/%s: %v", event, name, err)
	}
	return b
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
