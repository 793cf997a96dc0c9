// Package prcheck owns the kukie/render check run on the pull requests the service
// did not open and on merge queue groups: for a head commit of a repository
// connected to one of a team's clusters, it finds the Applications of all the
// team's clusters that deploy from the repository at the base branch and whose
// render reads a changed file (render's reach, the one a plan proves an edit with),
// renders each at the merge base and at the head, and publishes what would change
// in each cluster: a per-app table, masked diffs within GitHub's limits, and
// annotations on the changed lines that cause a change or a failure. Beside it, on
// the same heads, it publishes kukie/policy: each reached app's head render checked
// against the rules of the .kukie.yml on the repository's default branch (package
// policy), findings annotated on the manifest lines that cause them. With the
// policy's dry-run rule on, the changed objects of a pull request from a branch of
// the repository itself are dry-run against their Applications' clusters (DryRun,
// bounded in count and time), each refusal a finding at the manifest line of the
// field it names; kukie PRs get the rule from their plan's dry-run.
//
// It reads repositories, clusters and the store and writes check runs and its own
// check records (Records), nothing else: it never edits a repository, never runs a
// plan, and sends a cluster nothing but that dry-run. A fork's head, and a merge
// group's, which may hold a fork's commits, are only rendered (pure, bounded, no
// plugins, no network), never sent to a cluster: so a fork's commit, which GitHub
// serves from the base repository, is checked like any other. A newer head of the same pull
// request or queue entry supersedes a check still running, on any replica: each
// check takes the next generation of its key in the store (Records) and asks
// whether it still holds it while it renders and before it publishes; a
// superseded check stops and says so on its own head, never on the new one. A push
// to a base branch marks stale, once and for a bounded number of pull requests, the
// completed runs whose Applications it reaches, and their kukie/policy runs when it
// changed the policy file; a push to the default branch that changed the policy
// file marks the kukie/policy runs of the pull requests into other branches too,
// whose policy it is. A check still running is told of the move and judges it
// once it completed, against where the branch is then, which holds the pushes
// that landed before its record too (BaseMoved), and a check into another branch
// against where the default branch is then; a judgement that fails is owed, said
// on the kukie/render run and the check's page, and made by the next push to the
// branch. The policy's moves are judged from the default branch's commit the check
// read its policy from (read just before the policy, and kept with the check), so
// a change of the policy file the check read is no move of it. The
// store keeps what each check computed (Result) for the check's web page, the
// check run's details link.
package prcheck
