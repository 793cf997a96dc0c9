package kube

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/version"
)

// Capabilities are what Argo CD tells a Helm chart about the cluster it deploys
// to (.Capabilities.KubeVersion and .Capabilities.APIVersions, passed to "helm
// template" as --kube-version and --api-versions).
type Capabilities struct {
	// KubeVersion is the API server's version without its vendor suffix
	// ("1.31.4" for "v1.31.4-eks-2d98532"), as Argo CD's repo server passes it.
	KubeVersion string
	// APIVersions are "group/version" and "group/version/Kind" of every resource
	// the API server serves that can be listed and watched, sorted: what Argo CD's
	// application controller reads from its cluster cache.
	APIVersions []string
}

var versionKey = readKey{read: "version"}

// Capabilities reads the server version and discovery through the discovery
// cache (see Options.DiscoveryTTL). A group whose discovery failed (an
// aggregated API that is down) is missing from APIVersions, as it is from Argo
// CD's cluster cache.
func (c *Cluster) Capabilities(ctx context.Context, mode ReadMode) (Capabilities, error) {
	v, err := c.cached(ctx, c.kinds, versionKey, mode, "read the server version", func(ctx context.Context) (any, error) {
		info, err := c.discovery.ServerVersionWithContext(ctx)
		if err != nil {
			return nil, err
		}
		parsed, err := version.ParseGeneric(info.GitVersion)
		if err != nil {
			return nil, fmt.Errorf("parse server version %q: %w", info.GitVersion, err)
		}
		return parsed.String(), nil
	})
	if err != nil {
		return Capabilities{}, err
	}
	sk, err := c.servedKinds(ctx, mode)
	if err != nil {
		return Capabilities{}, err
	}
	return Capabilities{KubeVersion: v.(string), APIVersions: slices.Clone(sk.apiVersions)}, nil
}
