//go:build e2e

package e2e

import "testing"

func (s *suite) testPipeline(t *testing.T) {}
