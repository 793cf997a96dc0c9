package prcheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/policy"
)

// policyCheck is the policy a check evaluates each app's head render against, and
// the head's tree its findings are located in.
type policyCheck struct {
	cfg  *policy.Config
	fsys fs.FS
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

// startPolicy publishes the kukie/policy run in progress.
func (c *Checker) startPolicy(ctx context.Context, h Head, pol *policy.Report) (github.CheckRunRef, error) {
	return c.GitHub.PublishCheckRun(ctx, h.InstallationID, h.Repo, h.HeadSHA, 0, github.CheckReport{
		Name: github.PolicyCheckRunName, ExternalID: h.Key, Title: "Checking the repository's policy",
		Summary: fmt.Sprintf("Checking %s at %s against the rules of %s on %s.", h.Repo, short(h.HeadSHA), policy.ConfigFile, pol.DefaultBranch)})
}

// policyOutcome adds what the check found to pol: the findings of each app whose
// head rendered, and which apps were not checked and why.
func (r *report) policyOutcome(pol *policy.Report) {
	for _, a := range r.apps {
		switch {
		case a.notChecked != "":
			pol.NotChecked = append(pol.NotChecked, a.name+": "+a.notChecked)
		case a.failed != "":
			pol.NotChecked = append(pol.NotChecked, a.name+": does not render at the head ("+oneLine(a.failed)+")")
		default:
			pol.Apps++
			pol.Findings = append(pol.Findings, a.findings...)
		}
	}
	pol.NotChecked = append(pol.NotChecked, r.notChecked...)
}
