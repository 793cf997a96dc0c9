//go:build e2e

package e2e

import "testing"

func (s *suite) testTrackingConformance(t *testing.T)   {}
func (s *suite) testSelfHealAndManualDrift(t *testing.T) {}
func (s *suite) testAppListAndDetail(t *testing.T)      {}
func (s *suite) testPipeline(t *testing.T)              {}
