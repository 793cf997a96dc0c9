// Package helmtemplate renders a loaded chart as "helm template" does: Helm's
// install in client-only dry-run mode (no cluster, the default capabilities
// with the kube version and API versions given, the release in memory), from
// the Helm SDK's own building blocks: release name validation, dependency
// processing, the values with their schema validation, the template engine and
// the manifest sorter.
//
// It exists so that rendering does not link Helm's action package, whose
// install, upgrade and release storage bring Kubernetes clients, kubectl's
// command packages, controller-runtime and SQL release drivers into every
// binary that renders a chart, and with them tens of milliseconds of package
// initialisation into every start of the program. What it returns must stay
// what action.Install returns for the same chart in the same mode; a test holds
// the two equal over charts that exercise each step.
package helmtemplate

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"text/template"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// notesFile is the template whose output is the release's notes, not a
// manifest.
const notesFile = "NOTES.txt"

// Options are the settings of "helm template" that a render sets.
type Options struct {
	ReleaseName string
	Namespace   string
	// IncludeCRDs puts the chart's crds/ files first in the manifest (--include-crds).
	IncludeCRDs          bool
	SkipSchemaValidation bool
	// KubeVersion, when set, replaces the default capabilities' version;
	// APIVersions are added to the default ones.
	KubeVersion *common.KubeVersion
	APIVersions common.VersionSet
	// TemplateFuncs are added to, or replace, the engine's template functions.
	TemplateFuncs template.FuncMap
}

// Render renders ch with vals (the user-supplied values, before the chart's
// defaults) and returns the release "helm template" prints: its Manifest (the
// CRDs when included, then the manifests in install order) and its Hooks. An
// error is Helm's, worded as Helm words it.
func Render(ctx context.Context, ch *chart.Chart, vals map[string]any, o Options) (*release.Release, error) {
	log := slog.Default()
	if err := chartutil.ValidateReleaseName(o.ReleaseName); err != nil {
		err = fmt.Errorf("release name %q: %w", o.ReleaseName, err)
		log.Error("release name check failed", slog.Any("error", err))
		return nil, fmt.Errorf("release name check failed: %w", err)
	}
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		log.Error("chart dependencies processing failed", slog.Any("error", err))
		return nil, fmt.Errorf("chart dependencies processing failed: %w", err)
	}
	caps := common.DefaultCapabilities.Copy()
	if o.KubeVersion != nil {
		caps.KubeVersion = *o.KubeVersion
	}
	caps.APIVersions = append(caps.APIVersions, o.APIVersions...)
	options := common.ReleaseOptions{Name: o.ReleaseName, Namespace: o.Namespace, Revision: 1, IsInstall: true}
	values, err := util.ToRenderValuesWithSchemaValidation(ch, vals, options, caps, o.SkipSchemaValidation)
	if err != nil {
		return nil, err
	}
	rel := &release.Release{
		Name:      o.ReleaseName,
		Namespace: o.Namespace,
		Chart:     ch,
		Config:    vals,
		Info:      &release.Info{Status: rcommon.StatusUnknown},
		Version:   1,
	}
	var manifest *bytes.Buffer
	rel.Hooks, manifest, rel.Info.Notes, err = renderResources(ctx, ch, values, caps, o)
	// A failed render still returns what it rendered, for the error's context.
	rel.Manifest = manifest.String()
	if err != nil {
		rel.SetStatus(rcommon.StatusFailed, "failed to render resource: "+err.Error())
		return rel, err
	}
	rel.SetStatus(rcommon.StatusPendingInstall, "Initial install underway")
	rel.Info.Description = "Dry run complete"
	return rel, nil
}

// renderResources is the client-only path of Helm's action.renderResources:
// no post-renderer, no output directory, secrets shown, only the top chart's
// notes.
func renderResources(ctx context.Context, ch *chart.Chart, values common.Values, caps *common.Capabilities, o Options) ([]*release.Hook, *bytes.Buffer, string, error) {
	b := bytes.NewBuffer(nil)
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, b, "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.Version)
	}
	e := engine.Engine{CustomTemplateFuncs: o.TemplateFuncs}
	files, err := e.RenderWithContext(ctx, ch, values)
	if err != nil {
		return nil, b, "", err
	}
	var notes bytes.Buffer
	for name, content := range files {
		if !strings.HasSuffix(name, notesFile) {
			continue
		}
		if name == path.Join(ch.Name(), "templates", notesFile) {
			if notes.Len() > 0 {
				notes.WriteString("\n")
			}
			notes.WriteString(content)
		}
		delete(files, name)
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		// As Helm does: the files as one blob, for the person to find what does
		// not parse.
		for name, content := range files {
			if strings.TrimSpace(content) == "" {
				continue
			}
			fmt.Fprintf(b, "---\n# Source: %s\n%s\n", name, content)
		}
		return hooks, b, "", err
	}
	if o.IncludeCRDs {
		for _, crd := range ch.CRDObjects() {
			fmt.Fprintf(b, "---\n# Source: %s\n%s\n", crd.Filename, string(crd.File.Data))
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return hooks, b, notes.String(), nil
}

// CheckDependencies is what "helm template" checks of a chart with
// dependencies before it renders: that each dependency Chart.yaml names is a
// loaded subchart (vendored under charts/ or fetched), with Helm's wording.
func CheckDependencies(ch *chart.Chart) error {
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if !slices.ContainsFunc(ch.Dependencies(), func(sub *chart.Chart) bool { return sub.Name() == d.Name }) {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("found in Chart.yaml, but missing in charts/ directory: %s", strings.Join(missing, ", "))
	}
	return nil
}
