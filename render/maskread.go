package render

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/yaml"
)

// MaskedFile reads name from the repository tree fsys with its secret values
// masked as a git diff masks them: Secret data, secret-looking keys and values,
// and whatever a kustomize secretGenerator (or a secret-looking configMapGenerator
// key) reads from the file, judged by the kustomizations in its directory and above.
// Helm values files, a chart's or those apps name (every Application that
// deploys from the repository, if known: a values file of one is no less secret
// when read for another), are masked by key whatever keys they hold; a file
// such an app reads whole into a value named like a secret (fileParameters
// tls.key) is masked whole. Line counts stay, so a reader can still point at a
// line.
func MaskedFile(fsys fs.FS, name string, apps []Application) (string, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	roles := generatorRoles([]string{name}, func(dir string) [][]byte {
		var out [][]byte
		for _, k := range konfig.RecognizedKustomizationFileNames() {
			if kust, err := fs.ReadFile(fsys, path.Join(dir, k)); err == nil {
				out = append(out, kust)
			}
		}
		return out
	})
	noteValuesFiles(roles, []string{name}, appFileRoles(apps, path.Clean), func(p string) bool {
		info, err := fs.Stat(fsys, p)
		return err == nil && info.Mode().IsRegular()
	})
	return strings.Join(maskFileLines(data, roles[name]), ""), nil
}

// MaskedManifests writes a render's objects as one multi-document YAML with Secret
// values and secret-looking values masked, as a cluster diff masks them: for people
// and assistants to read, never to apply.
func MaskedManifests(objs []Object) (string, error) {
	var b strings.Builder
	for i, o := range objs {
		apiVersion, _ := o.Manifest["apiVersion"].(string)
		kind, _ := o.Manifest["kind"].(string)
		out, err := yaml.Marshal(maskBody(groupOf(apiVersion), kind, o.Manifest))
		if err != nil {
			return "", fmt.Errorf("write %s %d: %w", kind, i, err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(out)
	}
	return b.String(), nil
}
