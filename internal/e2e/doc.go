// Package e2e holds the change pipeline's acceptance tests: the whole service as
// service.New builds it for serve (HTTP API, webhook inbox and handlers, pipeline,
// render, kube) against a real API server (envtest), the fake GitHub and both
// databases, with a test-side syncer playing Argo CD. It has no code of its own.
package e2e
