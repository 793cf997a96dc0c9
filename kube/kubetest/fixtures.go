package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kukie/kukie-gitops/internal/moduleroot"
)

// Objects reads the YAML documents of a file under the module root (for example
// "testdata/argocd/resources.yaml"), replacing each "${KEY}" with vars[KEY] first, so
// one fixture serves tests that each use namespaces of their own. A placeholder
// without a value is a test failure.
func Objects(tb testing.TB, path string, vars map[string]string) []*unstructured.Unstructured {
	tb.Helper()
	root, err := moduleroot.Find()
	if err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		tb.Fatalf("read fixture: %v", err)
	}
	data, err = Expand(data, vars)
	if err != nil {
		tb.Fatalf("fixture %s: %v", path, err)
	}
	objs, err := DecodeObjects(data)
	if err != nil {
		tb.Fatalf("fixture %s: %v", path, err)
	}
	return objs
}

var placeholder = regexp.MustCompile(`\$\{([A-Z_]+)\}`)

// Expand replaces "${KEY}" placeholders with vars[KEY].
func Expand(data []byte, vars map[string]string) ([]byte, error) {
	var missing []string
	out := placeholder.ReplaceAllFunc(data, func(m []byte) []byte {
		key := string(placeholder.FindSubmatch(m)[1])
		v, ok := vars[key]
		if !ok {
			missing = append(missing, key)
			return m
		}
		return []byte(v)
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("no value for placeholders %v", missing)
	}
	return out, nil
}

// DecodeObjects decodes YAML or JSON documents into objects; empty documents are
// skipped.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
