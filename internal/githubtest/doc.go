// Package githubtest owns a fake GitHub for tests and for the demo (hack/demo): one
// in-process HTTP server that speaks the subset of GitHub's REST API this project uses (Apps, installation tokens,
// repositories, git data, tarballs, pull requests, check runs, issue comments,
// collaborator permissions, and the App's user authorization: the web flow's authorize
// page, the OAuth code exchange, the installations a user can access, GET /user, and
// repository reads with a user's token, which reach what both the person and the App
// can), backed by real bare git repositories on
// disk, and that delivers signed webhooks the way GitHub does.
//
// The fake is faithful where the service could go wrong: installation tokens expire
// (on a test clock) and are scoped to repositories and permissions, App JWTs are
// verified against the App's key, git objects are real (SHAs equal what git computes),
// and errors carry GitHub's status codes and bodies. Every request is counted so a test
// can assert that some path made no call to GitHub at all. InjectFault makes chosen
// routes fail as GitHub does on a bad day (5xx, requests that never answer, primary and
// secondary rate limits with their headers), for a number of requests or until removed.
// EnforceSecondaryLimits makes it refuse, as GitHub does, whatever goes over GitHub's
// secondary limits (concurrent and content-creating requests per caller) and counts
// those refusals; a request counts in flight until GitHub would have finished serving
// it (at most its 10 s server timeout), whether or not its client is still there. Successful JSON reads carry an ETag and a conditional read of an
// unchanged resource is answered 304 Not Modified, as GitHub does.
//
// Clients use the server as a GitHub Enterprise host: the REST API answers both at the
// root and under /api/v3/, so go-github's WithEnterpriseURLs(srv.URL(), srv.URL()) and
// go-githubapp's Config{V3APIURL: srv.APIURL()} both work. Repositories can also be
// cloned over smart HTTP from CloneURL, served by `git http-backend`.
//
// A typical test:
//
//	gh := githubtest.New(t)
//	gh.SetWebhookURL(service.URL + "/api/github/hook") // signed with gh.WebhookSecret()
//	gh.CreateRepo(t, "acme", "deploy", map[string]string{"apps/web/kustomization.yaml": "..."}, "main")
//	id := gh.CreateInstallation(t, "acme", "deploy") // fires installation "created"
//	cfg.App.IntegrationID, cfg.App.PrivateKey = gh.AppID(), gh.PrivateKeyPEM().Reveal()
//	cfg.V3APIURL = gh.APIURL()
//	... exercise the service ...
//	pr := gh.PullRequests(t, "acme/deploy")[0]
//	gh.Merge(t, "acme/deploy", pr.GetNumber(), githubtest.Squash) // fires push + closed
//	if gh.TotalRequests() != 0 { ... }
//
// Helpers take a TB (the part of testing.TB they use), so the package does not import
// testing and a program can run the fake too; the service binary never links it.
//
// Webhook payload fixtures written after GitHub's documentation live in
// testdata/webhooks (see Fixture and DeliverPayload).
package githubtest
