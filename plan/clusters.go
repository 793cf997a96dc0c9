package plan

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// otherClusterReads bounds the team's other clusters read at once.
const otherClusterReads = 4

// otherClusterApps returns render's view of the Applications in the team's other
// clusters that deploy from the plan's repository at branch: an edit that changes
// one of them changes that cluster too, so it is verified like the plan's own
// cluster's. Their names end in " (cluster <name>)". A cluster that cannot be read
// is listed in notChecked, "cluster <name> (<why>)", for the check run and the pull
// request to say; the reason is the class of the failure, never the error text,
// which can carry the cluster's address into a pull request. Why a Helm app
// renders with Helm's default capabilities is added to notes, by its name here.
func (p *Pipeline) otherClusterApps(ctx context.Context, pl store.Plan, branch string, notes map[string]string) (apps []render.Application, notChecked []string, err error) {
	names, err := p.cluster.Clusters(ctx, pl.TeamID)
	if err != nil {
		return nil, nil, fmt.Errorf("list the clusters of the team: %w", err)
	}
	sort.Strings(names)
	type read struct {
		apps  []render.Application
		notes map[string]string
		err   error
	}
	reads := make([]read, len(names))
	slots := make(chan struct{}, otherClusterReads)
	registered := p.registered(ctx, pl.TeamID)
	var wg sync.WaitGroup
	for i, name := range names {
		if name == pl.Cluster {
			continue
		}
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			ref := clusteraccess.Ref{TeamID: pl.TeamID, Name: name}
			apps, err := p.cluster.Applications(ctx, ref)
			if err == nil {
				reads[i].apps, reads[i].notes = renderApps(apps, pl.Repo, branch, p.capabilities(ctx, ref), registered)
			}
			reads[i].err = err
		})
	}
	wg.Wait()
	for i, name := range names {
		if name == pl.Cluster {
			continue
		}
		if err := reads[i].err; err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("plan", pl.Code).Str("cluster", name).Msg("Could not read the Applications of another cluster of the team; the change is not checked there")
			notChecked = append(notChecked, fmt.Sprintf("cluster %s (%s)", name, unreadReason(err)))
			continue
		}
		for _, a := range reads[i].apps {
			note := reads[i].notes[a.Name]
			a.Name += " (cluster " + name + ")"
			if note != "" {
				notes[a.Name] = note
			}
			apps = append(apps, a)
		}
	}
	return apps, notChecked, nil
}

// unreadReason says, without the error's text, why a cluster could not be read.
func unreadReason(err error) string {
	switch kube.ClassOf(err) {
	case argocd.FailureUnreachable:
		return "unreachable"
	case argocd.FailureForbidden:
		return "the service may not list its Argo CD Applications"
	case argocd.FailureNotInstalled:
		return "Argo CD is not installed"
	}
	return "its Applications could not be read"
}
