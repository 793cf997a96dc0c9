//go:build e2e

// Package e2e holds the end-to-end tests of the service against a real Argo CD (see
// e2e/argocdharness) and the fake GitHub. They build only with the e2e tag and run
// through hack/e2e.sh (make e2e).
package e2e

import (
	"os"
	"testing"

	"github.com/kukie/kukie-gitops/e2e/argocdharness"
)

func TestMain(m *testing.M) { os.Exit(argocdharness.Main(m)) }
