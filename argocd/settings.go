package argocd

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// SettingsConfigMap is the ConfigMap of Argo CD's settings, in its control-plane
// namespace.
const SettingsConfigMap = "argocd-cm"

// Settings are the argocd-cm settings that change what Argo CD renders. Only
// these keys are kept: argocd-cm also holds SSO configuration the service has no
// business reading.
type Settings struct {
	// KustomizeBuildOptions is "kustomize.buildOptions": the flags Argo CD 3.6
	// passes to every "kustomize build" (it parses the per-version
	// "kustomize.buildOptions.<version>" keys but does not pass them).
	KustomizeBuildOptions string
	// KustomizeVersions are the versions argocd-cm registers a kustomize binary
	// for ("kustomize.version.<v>" or "kustomize.path.<v>"); an Application naming
	// another one in spec.source.kustomize.version does not render.
	KustomizeVersions []string
}

// ParseSettings reads Settings from the data of argocd-cm.
func ParseSettings(data map[string]string) Settings {
	s := Settings{KustomizeBuildOptions: data["kustomize.buildOptions"]}
	for k := range data {
		for _, prefix := range []string{"kustomize.version.", "kustomize.path."} {
			if v, ok := strings.CutPrefix(k, prefix); ok {
				s.KustomizeVersions = append(s.KustomizeVersions, v)
			}
		}
	}
	sort.Strings(s.KustomizeVersions)
	return s
}

// DecodeSettingsConfigMap reads Settings from argocd-cm as a YAML or JSON
// manifest (what "kubectl get configmap argocd-cm -o yaml" prints).
func DecodeSettingsConfigMap(data []byte) (Settings, error) {
	var cm struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		return Settings{}, fmt.Errorf("decode %s: %w", SettingsConfigMap, err)
	}
	if cm.Kind != "ConfigMap" {
		return Settings{}, fmt.Errorf("decode %s: the manifest is a %q, not a ConfigMap", SettingsConfigMap, cm.Kind)
	}
	return ParseSettings(cm.Data), nil
}

// RegistersKustomizeVersion reports whether Argo CD can build with version.
func (s Settings) RegistersKustomizeVersion(version string) bool {
	for _, v := range s.KustomizeVersions {
		if v == version {
			return true
		}
	}
	return false
}
