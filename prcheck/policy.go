package prcheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/markdown"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/policy"
)

// policyCheck is the policy a check evaluates each app's head render against, and
// the head's tree its findings are located in.
type policyCheck struct {
	cfg  *policy.Config
	fsys fs.FS
	// dryRun, when set, dry-runs each app's changed objects.
	dryRun *dryRunCheck
}

// connected names the team and its clusters h's repository is connected to and,
// when there are any, reads the repository's policy.
func (c *Checker) connected(ctx context.Context, h Head) (team string, clusters []string, pol *policy.Report, err error) {
	team, clusters, err = c.Connections.ConnectedClusters(ctx, h.InstallationID, h.RepoURL)
	if err != nil || len(clusters) == 0 {
		return team, nil, nil, err
	}
	pol, err = c.readPolicy(ctx, h)
	return team, clusters, pol, err
}

// policySince is where the repository's default branch is as the check of a pull
// request starts, read just before its policy: the policy is read there at that
// commit or a later one, so the policy file's changes up to it are not moves of
// the policy the check was judged by (store.PullCheck.PolicySHA). The default
// branch is the one GitHub names with the pull request pr, h's base branch when it
// could not be read. "" for a merge group, or when GitHub does not say.
func (c *Checker) policySince(ctx context.Context, h Head, pr *github.PullRequest) (branch, sha string) {
	branch = h.BaseBranch
	if pr != nil && pr.DefaultBranch != "" {
		branch = pr.DefaultBranch
	}
	if _, ok := pullNumber(h.Key); !ok || c.Records == nil {
		return branch, ""
	}
	sha, found, err := c.GitHub.BranchHead(ctx, h.InstallationID, h.Repo, branch)
	if err != nil || !found {
		return branch, ""
	}
	return branch, sha
}

// readPolicy reads the repository's .kukie.yml from its default branch (never the
// head's: a pull request does not choose the rules it is checked by). A file that
// cannot be used is the report's ConfigErr, not an error.
func (c *Checker) readPolicy(ctx context.Context, h Head) (*policy.Report, error) {
	data, branch, found, err := c.GitHub.DefaultBranchFile(ctx, h.InstallationID, h.Repo, policy.ConfigFile, policy.MaxConfigBytes)
	rep := &policy.Report{Repo: h.Repo, DefaultBranch: branch}
	switch {
	case errors.Is(err, github.ErrBlobTooLarge):
		rep.ConfigErr = &policy.ParseError{Msg: fmt.Sprintf("the file is larger than the %d bytes a policy may have", policy.MaxConfigBytes)}
		return rep, nil
	case err != nil:
		return nil, fmt.Errorf("read the policy of %s: %w", h.Repo, err)
	case !found:
		return rep, nil
	}
	cfg, err := policy.Parse(data)
	var pe *policy.ParseError
	switch {
	case errors.As(err, &pe):
		rep.ConfigErr = pe
	case err != nil:
		return nil, err
	default:
		rep.Config = cfg
	}
	return rep, nil
}

// startPolicy publishes the kukie/policy run in progress, linking to details.
func (c *Checker) startPolicy(ctx context.Context, h Head, pol *policy.Report, details string) (github.CheckRunRef, error) {
	return c.GitHub.PublishCheckRun(ctx, h.InstallationID, h.Repo, h.HeadSHA, 0, github.CheckReport{
		Name: github.PolicyCheckRunName, ExternalID: h.Key, DetailsURL: details, Title: "Checking the repository's policy",
		Summary: policyStartSummary(h, pol.DefaultBranch)})
}

// renderingSummary and policyStartSummary are the summaries of h's runs while they
// run. The branches are named by whoever opened the pull request and by the
// repository: markdown.Name writes them as code when they hold "@team".
func renderingSummary(h Head) string {
	return fmt.Sprintf("Rendering %s at %s against %s.", h.Repo, short(h.HeadSHA), markdown.Name(h.BaseBranch))
}

func policyStartSummary(h Head, defaultBranch string) string {
	return fmt.Sprintf("Checking %s at %s against the rules of `%s` on %s.", h.Repo, short(h.HeadSHA), policy.ConfigFile, markdown.Name(defaultBranch))
}

// policyOutcome adds what the check found to pol: the findings of each app whose
// head rendered, and which apps were not checked and why.
func (r *report) policyOutcome(pol *policy.Report) {
	for _, a := range r.apps {
		switch {
		case a.notChecked != "":
			pol.NotChecked = append(pol.NotChecked, policy.Unchecked{Name: a.name, Quote: a.notChecked})
		case a.failed != "":
			pol.NotChecked = append(pol.NotChecked, policy.Unchecked{Name: a.name, Why: "does not render at the head", Quote: a.failed})
		default:
			pol.Apps++
			pol.Findings = append(pol.Findings, a.findings...)
		}
	}
	for _, n := range r.notChecked {
		// The service's words, naming a cluster by its registered name.
		pol.NotChecked = append(pol.NotChecked, policy.Unchecked{Why: n})
	}
}

// CheckPolicy publishes kukie/policy on a plan's head (plan.Policy): the head's
// render of the Applications the plan's change reaches, checked against the
// repository's policy, and the plan's server-side dry-run as the dry_run rule sees
// it. A repository without a policy gets its neutral run without a render. The
// run's details link is the change's page, as kukie/render's is.
func (c *Checker) CheckPolicy(ctx context.Context, ph plan.PolicyHead) error {
	h := Head{InstallationID: ph.InstallationID, Repo: ph.Repo, RepoURL: ph.RepoURL, BaseBranch: ph.BaseBranch,
		BaseSHA: ph.BaseSHA, HeadSHA: ph.HeadSHA, Key: ph.Key}
	team, clusters, pol, err := c.connected(ctx, h)
	if err != nil || len(clusters) == 0 {
		return err
	}
	details := changeURL(c.PublicURL, ph.Key)
	if pol.Config != nil && pol.Config.Enabled() {
		ref, err := c.startPolicy(ctx, h, pol, details)
		if err != nil {
			return err
		}
		rep, err := c.evaluate(ctx, h, team, clusters, pol.Config, true, nil)
		if err != nil {
			return err
		}
		rep.policyOutcome(pol)
		if ph.DryRun.Outcome != "" {
			pol.AddDryRun(ph.DryRun)
		} else {
			pol.DryRunAbsent = "the plan sent no object to the cluster"
		}
		report := pol.CheckReport(h.Key)
		report.DetailsURL = details
		_, err = c.GitHub.PublishCheckRun(ctx, h.InstallationID, h.Repo, h.HeadSHA, ref.ID, report)
		return err
	}
	report := pol.CheckReport(h.Key)
	report.DetailsURL = details
	_, err = c.GitHub.PublishCheckRun(ctx, h.InstallationID, h.Repo, h.HeadSHA, 0, report)
	return err
}

// changeURL is the page of the change code (plan.ChangePagePath); "" without a
// public URL.
func changeURL(publicURL, code string) string {
	if publicURL == "" || code == "" {
		return ""
	}
	return strings.TrimSuffix(publicURL, "/") + plan.ChangePagePath + url.PathEscape(code)
}

var _ plan.Policy = (*Checker)(nil)
