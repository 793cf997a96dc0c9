// Package deploy holds what runs and watches the service on Kubernetes: the Helm
// chart (chart/kukie-gitops), the same manifests as plain YAML generated from the
// chart's defaults (kubernetes/kukie-gitops.yaml), the Grafana dashboard and the
// Prometheus rules. It has no Go code of its own. Its tests render the chart with the
// Helm SDK, lint it as helm lint does, apply what it renders to a real API server in a
// server-side dry run, check the service account's rights, and fail when the plain
// YAML is no longer what the chart renders (go test ./deploy -update rewrites it).
package deploy
