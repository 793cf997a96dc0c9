package helmrepo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/kukie/kukie-gitops/render"
)

// fetchFromRegistry pulls dep as Helm stores a chart in an OCI registry: the
// manifest of tag <version> in repository <registry path>/<name>, whose chart
// layer is the archive. Both are verified against their content digests.
func (f *Fetcher) fetchFromRegistry(ctx context.Context, u *url.URL, dep render.ChartDependency) ([]byte, error) {
	ref := u.Host + strings.TrimSuffix(u.Path, "/") + "/" + dep.Name
	r, err := remote.NewRepository(ref)
	if err != nil {
		return nil, fmt.Errorf("registry repository %s: %w", ref, err)
	}
	r.PlainHTTP = f.plainHTTP
	r.MaxMetadataBytes = MaxManifestBytes
	// Anonymous: the registry's token flow, never a credential of this host.
	r.Client = &auth.Client{Client: f.registryClient()}
	tag := strings.ReplaceAll(dep.Version, "+", "_") // as helm push tags a version with build metadata
	desc, rc, err := r.FetchReference(ctx, tag)
	if err != nil {
		return nil, fmt.Errorf("the registry is unreachable or has no %s:%s: %w", ref, tag, err)
	}
	if desc.Size > MaxManifestBytes {
		rc.Close()
		return nil, fmt.Errorf("the manifest of %s:%s is %d bytes, at most %d: %w", ref, tag, desc.Size, MaxManifestBytes, render.ErrChartTooLarge)
	}
	raw, err := content.ReadAll(rc, desc)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("read the manifest of %s:%s: %w", ref, tag, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("the manifest of %s:%s does not parse: %w", ref, tag, err)
	}
	if m.Config.MediaType != registry.ConfigMediaType {
		return nil, fmt.Errorf("%s:%s is not a Helm chart (its config is %q)", ref, tag, m.Config.MediaType)
	}
	var layer *ocispec.Descriptor
	for i, l := range m.Layers {
		if l.MediaType == registry.ChartLayerMediaType || l.MediaType == registry.LegacyChartLayerMediaType {
			layer = &m.Layers[i]
			break
		}
	}
	if layer == nil {
		return nil, fmt.Errorf("%s:%s holds no chart layer", ref, tag)
	}
	key := archiveKey{repository: dep.Repository, name: dep.Name, version: dep.Version, digest: layer.Digest.String()}
	if data, ok := f.archives.Get(key); ok {
		return data, nil
	}
	if layer.Size > MaxArchiveBytes {
		return nil, fmt.Errorf("the chart layer of %s:%s is %d bytes, at most %d: %w", ref, tag, layer.Size, MaxArchiveBytes, render.ErrChartTooLarge)
	}
	data, err := content.FetchAll(ctx, r.Blobs(), *layer)
	if err != nil {
		return nil, fmt.Errorf("read the chart layer of %s:%s: %w", ref, tag, err)
	}
	f.archives.Add(key, data)
	return data, nil
}
