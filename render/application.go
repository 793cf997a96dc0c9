package render

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
)

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
