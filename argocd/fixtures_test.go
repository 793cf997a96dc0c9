package argocd

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kukie/kukie-gitops/objref"
)

// Namespaces the fixtures are placed in by the tests of this package.
const (
	argoNS = "argocd"
	appsNS = "team-a"
	workNS = "shop"
)

// fixture reads a file of ../testdata/argocd with its placeholders filled.
func fixture(t *testing.T, name string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile("../testdata/argocd/" + name)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.NewReplacer("${ARGOCD_NS}", argoNS, "${APPS_NS}", appsNS, "${NS}", workNS).Replace(string(data)))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]any
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", name, err)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
}

func fixtureApps(t *testing.T) []Application {
	t.Helper()
	var apps []Application
	for _, obj := range fixture(t, "applications.yaml") {
		app, err := ParseApplication(obj)
		if err != nil {
			t.Fatal(err)
		}
		apps = append(apps, app)
	}
	return apps
}

// fixtureResources returns the workload objects by name.
func fixtureResources(t *testing.T) map[string]Resource {
	t.Helper()
	out := map[string]Resource{}
	for _, obj := range fixture(t, "resources.yaml") {
		md := obj["metadata"].(map[string]any)
		ref, err := RefOf(objref.Target{APIVersion: obj["apiVersion"].(string), Kind: obj["kind"].(string), Namespace: md["namespace"].(string), Name: md["name"].(string)})
		if err != nil {
			t.Fatal(err)
		}
		out[ref.Name] = Resource{Ref: ref, Labels: stringMap(md["labels"]), Annotations: stringMap(md["annotations"])}
	}
	return out
}

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k], _ = v.(string)
	}
	return out
}
