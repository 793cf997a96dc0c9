// Package plan owns the change pipeline: one plan per change request, moved through
// a fixed state machine (deciding, preparing, waiting, committing, pr_open, merged,
// deploying, deployed, …) by steps that are each idempotent and recorded, so a
// restarted process resumes every plan exactly where it stopped and never opens a
// second branch, commit, pull request or check run for it.
//
// The package decides nothing about Kubernetes objects or YAML itself: the path
// decision comes from argocd/ and kube/, the edit and its proof from render/, and
// every write to GitHub goes through github/. It owns the order of those calls, the
// locks that keep two open pull requests off one file, idempotency of requests,
// tracking a merged change until it runs, and rollbacks (a revert rendered, diffed
// and verified by render/ from the original plan's edits, like any change).
//
// It holds no client, credential or cache of its own and opens no connection: New
// takes them as [Deps], through the small interfaces in deps.go, so each step can be
// tested alone. In the service they are github.Repos (repository operations through
// an installation's client), clusteraccess.Clusters and clusteraccess.Connections
// (the team's clusters with their sealed credentials, and which installation reaches
// a connected repository) and cache.RenderEngine (render with the before-render
// cache), and prcheck.Checker as [Policy]: beside each kukie/render run the
// pipeline publishes kukie/policy on the same head, with its dry-run's outcome. It
// must not import go-github, client-go or the HTTP packages (server,
// api/…, service): requests reach it through its methods, never the other way.
//
// "Nothing else changes" spans the team: an edit is verified for every Application
// that deploys from the same repository and branch in any of the team's clusters,
// and a cluster that cannot be read is named in the pull request and check run as
// not checked.
//
// Replicas share plans through claims in the store: one worker runs a plan's steps
// at a time, renews its claim while it works, renews it again right before each
// GitHub write, and records a step only while its claim's epoch still holds the plan
// (claim.go). A worker that loses its claim stops and records nothing; what it wrote
// to GitHub without recording it is adopted by the next holder.
//
// GitHub does not deliver again a webhook event the service missed, so the pull
// request of every pr_open plan is also read periodically (SweepPulls), by one
// replica per plan and interval as the store records, and a pull request found
// merged or closed moves its plan through the same path as its event (PullClosed).
//
// What a plan shows people (pull request, check run, stored diffs, change API) is
// render's masked text; the edited files' bytes it keeps to commit and revert are
// sealed in the store when the service has an encryption key ([EditSealer]).
package plan
