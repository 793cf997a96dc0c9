package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/argocd"
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

// MaskedAppDetail returns d with the secret values of the Application's
// sources masked as a cluster diff of the Application masks them (a
// secret-looking Helm parameter's value, the secret-looking keys of valuesObject
// and of the values string, the secret values of inline kustomize patches), and
// scrubbed from what Argo CD wrote of it (its conditions, health and last sync
// messages), which may quote them as Helm did. For people to read, never to
// render.
func MaskedAppDetail(d argocd.AppDetail) (argocd.AppDetail, error) {
	sources, values, err := maskedSources(d.Sources)
	if err != nil {
		return d, err
	}
	out := d
	out.Sources = sources
	s := newScrubber(values)
	out.HealthMessage = s.text(d.HealthMessage)
	out.Warnings, out.Errors = scrubbedConditions(s, d.Warnings), scrubbedConditions(s, d.Errors)
	if d.Operation != nil {
		op := *d.Operation
		op.Message = s.text(op.Message)
		out.Operation = &op
	}
	return out, nil
}

// MaskedAppList is the list view of apps (argocd.SummarizeApps) with what Argo
// CD wrote of each, which its problems quote (its last sync's message, its
// error conditions), scrubbed of the secret values of its own sources, as
// MaskedAppDetail scrubs them. apps are left as they are.
func MaskedAppList(apps []argocd.Application) (argocd.AppList, error) {
	shown := make([]argocd.Application, len(apps))
	for i, a := range apps {
		shown[i] = a
		if a.Status.OperationState == nil && len(a.Status.Conditions) == 0 {
			continue // nothing Argo CD wrote of it is shown
		}
		_, values, err := maskedSources(a.Sources())
		if err != nil {
			return argocd.AppList{}, fmt.Errorf("application %s: %w", a.Key(), err)
		}
		s := newScrubber(values)
		if op := a.Status.OperationState; op != nil {
			scrubbed := *op
			scrubbed.Message = s.text(op.Message)
			shown[i].Status.OperationState = &scrubbed
		}
		shown[i].Status.Conditions = scrubbedConditions(s, a.Status.Conditions)
	}
	return argocd.SummarizeApps(shown), nil
}

// maskedSources returns sources masked as a cluster diff of their Application
// masks them, new sources whatever they share with the Application's, and the
// values masked: as the sources hold them, and a Helm parameter's as Argo CD
// passes it to helm template (its commas escaped), which Argo CD's errors quote.
func maskedSources(sources []argocd.AppSource) ([]argocd.AppSource, []string, error) {
	data, err := json.Marshal(sources)
	if err != nil {
		return nil, nil, fmt.Errorf("write sources: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are written back as they were read
	var items []any
	if err := dec.Decode(&items); err != nil {
		return nil, nil, fmt.Errorf("read sources: %w", err)
	}
	var values []string
	for i, it := range items {
		at := []string{"spec", "sources", fmt.Sprintf("[%d]", i)}
		collectSensitive("argoproj.io", "Application", at, it, false, nil, &values)
		items[i] = maskValueAt("argoproj.io", "Application", at, it)
	}
	for _, src := range sources {
		if src.Helm == nil {
			continue
		}
		for _, p := range src.Helm.Parameters {
			if looksSecret(p.Name) && scrubbedByKey(p.Value) {
				values = append(values, cleanSetParameter(p.Value))
			}
		}
	}
	if data, err = json.Marshal(items); err != nil {
		return nil, nil, fmt.Errorf("write masked sources: %w", err)
	}
	// Into new sources: the given ones point at the Application's own helm and
	// kustomize blocks, which decoding into them would mask in place, and a
	// cluster's read cache shares those with every later read of the
	// Application.
	var masked []argocd.AppSource
	if err := json.Unmarshal(data, &masked); err != nil {
		return nil, nil, fmt.Errorf("read masked sources: %w", err)
	}
	return masked, values, nil
}

func scrubbedConditions(s *scrubber, cs []argocd.AppCondition) []argocd.AppCondition {
	out := make([]argocd.AppCondition, len(cs))
	for i, c := range cs {
		c.Message = s.text(c.Message)
		out[i] = c
	}
	return out
}
