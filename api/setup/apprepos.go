package setup

import (
	"context"
	"fmt"
	"sort"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// ClusterApplications reads a registered cluster's Argo CD Applications;
// clusteraccess.Clusters implements it with the cluster's stored credentials.
type ClusterApplications interface {
	Applications(ctx context.Context, cluster clusteraccess.Ref) ([]argocd.Application, error)
}

// ApplicationRepos implements ApplicationRepoLister by reading the cluster's
// Applications.
type ApplicationRepos struct {
	Clusters ClusterApplications
}

// RepoURLs implements ApplicationRepoLister: the repositories of every source of
// every Application (spec.source and spec.sources[]), each once in its canonical
// form, sorted. Helm chart repositories (a source with a chart) are not Git
// repositories and are left out; a URL that names no repository is returned as
// written, for the caller to report.
func (l ApplicationRepos) RepoURLs(ctx context.Context, cluster store.Cluster) ([]string, error) {
	apps, err := l.Clusters.Applications(ctx, clusteraccess.Ref{TeamID: cluster.TeamID, Name: cluster.Name})
	if err != nil {
		return nil, fmt.Errorf("read applications of cluster %s: %w", cluster.Name, err)
	}
	seen := map[string]bool{}
	var out []string
	add := func(src argocd.AppSource) {
		if src.RepoURL == "" || src.Chart != "" {
			return
		}
		u, err := github.NormalizeRepoURL(src.RepoURL)
		if err != nil {
			u = src.RepoURL
		}
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, app := range apps {
		for _, src := range app.Sources() {
			add(src)
		}
	}
	sort.Strings(out)
	return out, nil
}
