package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kukie/kukie-gitops/argocd"
)

// FromArgoCD converts an Argo CD Application into render's view: one Application
// for each of its sources that keep accepts (nil keeps every source). It is the
// only converter between the two models; the service and the offline plan command
// both use it, so they read the same options and refuse the same ones.
//
// A source render cannot mirror still converts, with Unsupported saying why: its
// path (and so its reach) is known, and Plan refuses only an edit that reaches it.
// That covers spec.source.kustomize options render does not apply, a kustomize
// replicas count that is not an integer, and every source of a multi-source
// Application (Argo CD renders them together, render one at a time).
//
// The source type is status.sourceType (status.sourceTypes for several sources),
// else the source's explicit kustomize, directory, helm or plugin block, as Argo CD
// reads it; it stays empty when neither says (see DetectSourceType). A source with
// a chart deploys from a Helm repository, never from a Git tree, and is Helm.
func FromArgoCD(a argocd.Application, keep func(argocd.AppSource) bool) []Application {
	sources := a.Sources()
	var out []Application
	for i, src := range sources {
		if keep != nil && !keep(src) {
			continue
		}
		app := Application{Name: a.Key().String(), Path: src.Path, Namespace: a.Spec.Destination.Namespace,
			ManifestGeneratePaths: a.ManifestGeneratePaths}
		if app.Path == "" {
			app.Path = "."
		}
		if len(sources) > 1 {
			if i > 0 {
				app.Name = fmt.Sprintf("%s (source %d)", app.Name, i+1)
			}
			if i < len(a.Status.SourceTypes) {
				app.SourceType = SourceType(a.Status.SourceTypes[i])
			}
			app.Unsupported = "multi-source Applications are not supported yet: Argo CD renders their sources together"
		} else {
			app.SourceType = SourceType(a.SourceType())
		}
		convertOptions(&app, src)
		if app.SourceType == SourceHelm && app.Helm.ReleaseName == "" {
			// Argo CD names the release after the Application, without its namespace.
			app.Helm.ReleaseName = a.Name
		}
		out = append(out, app)
	}
	return out
}

// convertOptions copies a source's kustomize and directory options, and takes the
// source type from an explicit block when the status does not say.
func convertOptions(app *Application, src argocd.AppSource) {
	if app.SourceType == "" {
		switch {
		case src.Chart != "" || src.Helm != nil:
			app.SourceType = SourceHelm
		case src.Plugin != nil:
			app.SourceType = SourcePlugin
		case src.Kustomize != nil:
			app.SourceType = SourceKustomize
		case src.Directory != nil:
			app.SourceType = SourceDirectory
		}
	}
	if k := src.Kustomize; k != nil {
		app.Kustomize = KustomizeOptions{NamePrefix: k.NamePrefix, NameSuffix: k.NameSuffix, Namespace: k.Namespace,
			CommonLabels: k.CommonLabels, CommonAnnotations: k.CommonAnnotations, Images: k.Images, Components: k.Components}
		var problems []string
		if len(k.Unsupported) > 0 {
			problems = append(problems, fmt.Sprintf("it sets spec.source.kustomize options that are not supported yet (%s); "+
				"Argo CD applies them when it renders, so no change it renders can be verified as Argo CD will deploy it",
				strings.Join(k.Unsupported, ", ")))
		}
		for _, r := range k.Replicas {
			count, err := strconv.ParseInt(r.Count.String(), 10, 64)
			if err != nil {
				// Argo CD cannot render it either.
				problems = append(problems, fmt.Sprintf("its spec.source.kustomize.replicas count %q for %s is not an integer", r.Count.String(), r.Name))
				continue
			}
			if app.Kustomize.Replicas == nil {
				app.Kustomize.Replicas = map[string]int64{}
			}
			app.Kustomize.Replicas[r.Name] = count
		}
		if len(problems) > 0 {
			app.Unsupported = joinReasons(app.Unsupported, strings.Join(problems, "; "))
		}
	}
	if d := src.Directory; d != nil {
		app.Directory = DirectoryOptions{Recurse: d.Recurse, Include: d.Include, Exclude: d.Exclude}
	}
	if src.Chart != "" {
		app.Unsupported = joinReasons(app.Unsupported, fmt.Sprintf("it deploys chart %s from the Helm repository %s, not from a Git repository", src.Chart, src.RepoURL))
	}
	if h := src.Helm; h != nil {
		convertHelm(app, h)
	}
}

// convertHelm copies spec.source.helm. Version and passCredentials only matter
// for a chart fetched from a Helm repository and are not carried.
func convertHelm(app *Application, h *argocd.AppSourceHelm) {
	o := HelmOptions{ReleaseName: h.ReleaseName, Namespace: h.Namespace, ValueFiles: h.ValueFiles,
		IgnoreMissingValueFiles: h.IgnoreMissingValueFiles, SkipCrds: h.SkipCrds, SkipTests: h.SkipTests,
		SkipSchemaValidation: h.SkipSchemaValidation, KubeVersion: h.KubeVersion, APIVersions: h.APIVersions}
	values, err := h.ValuesYAML()
	if err != nil {
		app.Unsupported = joinReasons(app.Unsupported, err.Error())
	}
	o.Values = string(values)
	if o.Values != "" {
		o.ValuesField = "values"
		if raw := strings.TrimSpace(string(h.ValuesObject)); raw != "" && raw != "null" {
			o.ValuesField = "valuesObject"
		}
	}
	for _, p := range h.Parameters {
		o.Parameters = append(o.Parameters, HelmParameter{Name: p.Name, Value: p.Value, ForceString: p.ForceString})
	}
	for _, p := range h.FileParameters {
		o.FileParameters = append(o.FileParameters, HelmFileParameter{Name: p.Name, Path: p.Path})
	}
	app.Helm = o
}

func joinReasons(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
