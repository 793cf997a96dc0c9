package render

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
)

// ManifestGeneratePathsAnnotation is Argo CD's annotation naming the paths an
// Application's manifests depend on.
const ManifestGeneratePathsAnnotation = "argocd.argoproj.io/manifest-generate-paths"

// ApplicationFromObject converts a decoded Argo CD Application (as read from the
// cluster or from a manifest) into what render needs. The source type comes from
// status.sourceType, else from the source's explicit kustomize/helm/directory/plugin
// block; it stays empty when neither says (see DetectSourceType). RepoURL is returned
// so callers can keep only the Applications of one repository.
func ApplicationFromObject(obj map[string]any) (app Application, repoURL string, err error) {
	obj, _ = normalize(obj).(map[string]any)
	if kind, _ := obj["kind"].(string); kind != "Application" {
		return Application{}, "", fmt.Errorf("object of kind %q is not an Application", kind)
	}
	str := func(m map[string]any, p ...string) string {
		v, _ := getPath(m, p)
		s, _ := v.(string)
		return s
	}
	app.Name = str(obj, "metadata", "name")
	if app.Name == "" {
		return Application{}, "", fmt.Errorf("application has no metadata.name")
	}
	app.ManifestGeneratePaths = str(obj, "metadata", "annotations", ManifestGeneratePathsAnnotation)
	app.Namespace = str(obj, "spec", "destination", "namespace")
	app.SourceType = SourceType(str(obj, "status", "sourceType"))
	src, ok := getPath(obj, []string{"spec", "source"})
	if !ok {
		if _, multi := getPath(obj, []string{"spec", "sources"}); multi {
			return Application{}, "", fmt.Errorf("application %s has several sources; multi-source applications are not supported", app.Name)
		}
		return Application{}, "", fmt.Errorf("application %s has no spec.source", app.Name)
	}
	source, _ := src.(map[string]any)
	repoURL = str(source, "repoURL")
	app.Path = str(source, "path")
	if app.Path == "" {
		app.Path = "."
	}
	if k, ok := source["kustomize"].(map[string]any); ok {
		if app.SourceType == "" {
			app.SourceType = SourceKustomize
		}
		app.Kustomize = KustomizeOptions{
			NamePrefix: str(k, "namePrefix"),
			NameSuffix: str(k, "nameSuffix"),
			Namespace:  str(k, "namespace"),
		}
		app.Kustomize.CommonLabels = stringMap(k["commonLabels"])
		app.Kustomize.CommonAnnotations = stringMap(k["commonAnnotations"])
		for _, img := range asList(k["images"]) {
			if s, ok := img.(string); ok {
				app.Kustomize.Images = append(app.Kustomize.Images, s)
			}
		}
		for _, c := range asList(k["components"]) {
			if s, ok := c.(string); ok {
				app.Kustomize.Components = append(app.Kustomize.Components, s)
			}
		}
		for _, r := range asList(k["replicas"]) {
			m, _ := r.(map[string]any)
			name, _ := m["name"].(string)
			var count int64
			switch c := m["count"].(type) {
			case int64:
				count = c
			case string:
				if _, err := fmt.Sscan(c, &count); err != nil {
					return Application{}, "", fmt.Errorf("application %s: replicas count %q for %s is not a number", app.Name, c, name)
				}
			}
			if app.Kustomize.Replicas == nil {
				app.Kustomize.Replicas = map[string]int64{}
			}
			app.Kustomize.Replicas[name] = count
		}
	}
	if d, ok := source["directory"].(map[string]any); ok {
		if app.SourceType == "" {
			app.SourceType = SourceDirectory
		}
		app.Directory.Recurse, _ = d["recurse"].(bool)
		app.Directory.Include = str(d, "include")
		app.Directory.Exclude = str(d, "exclude")
	}
	if _, ok := source["helm"]; ok && app.SourceType == "" {
		app.SourceType = SourceHelm
	}
	if _, ok := source["plugin"]; ok && app.SourceType == "" {
		app.SourceType = SourcePlugin
	}
	if _, ok := source["chart"]; ok && app.SourceType == "" {
		app.SourceType = SourceHelm
	}
	return app, repoURL, nil
}

func stringMap(v any) map[string]string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, val := range m {
		out[k] = fmt.Sprint(val)
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// DetectSourceType finds an app's format the way Argo CD's repo server does when
// neither status.sourceType nor an explicit source block says (and no config
// management plugin claims it): among the files directly at the app path (a
// symlink counts by its name, as Argo CD's walk does not follow it), a
// kustomization file (kustomization.yaml, kustomization.yml or Kustomization)
// makes it Kustomize, even next to a chart; else a file whose name ends in
// "Chart.yaml" makes it Helm; else it is a Directory. Files in subdirectories
// never count.
func DetectSourceType(repoDir, appPath string) (SourceType, error) {
	rel, ok := cleanRel(appPath)
	if !ok {
		return "", refuse(CodePathEscape, "path %q leaves the repository", appPath)
	}
	t, err := openTree(repoDir)
	if err != nil {
		return "", err
	}
	st := t.stat(rel)
	if st.err != nil {
		return "", st.err
	}
	if st.kind != kindDir {
		return "", fmt.Errorf("application path %s is not a directory of %s", appPath, repoDir)
	}
	listing := t.listDir(st.canon, st.real)
	if listing.err != nil {
		return "", listing.err
	}
	kustomizations := konfig.RecognizedKustomizationFileNames()
	detected := SourceDirectory
	for _, name := range listing.names {
		if listing.modes[name].IsDir() {
			continue
		}
		switch {
		case slices.Contains(kustomizations, name):
			return SourceKustomize, nil
		case strings.HasSuffix(name, "Chart.yaml"):
			detected = SourceHelm
		}
	}
	return detected, nil
}
