package render

import (
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

// TestTransformWorkBoundsWhatTransformersSet estimates the transformer work of
// kustomizations before any build: values set on every resource they select are
// counted once per resource, so a large value over many resources is refused
// naming the kustomization, while what real overlays set, a large patch naming
// one resource, or many resources with small transformers, is not.
func TestTransformWorkBoundsWhatTransformersSet(t *testing.T) {
	cms := configMaps(900, "cm")
	patch := func(size int) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm1\ndata:\n  blob: " + strings.Repeat("x", size) + "\n"
	}
	cases := map[string]struct {
		files      map[string]string
		opts       KustomizeOptions
		components []string
		want       string // a part of the refusal; "" for none
	}{
		"small targeted patches over many resources": {
			files: map[string]string{"app/cms.yaml": cms, "app/p.yaml": patch(4000),
				"app/kustomization.yaml": "resources:\n- cms.yaml\npatches:\n- path: p.yaml\n  target:\n    kind: ConfigMap\ncommonAnnotations:\n  team: web\n"},
		},
		"a large patch naming its resource": {
			files: map[string]string{"app/cms.yaml": cms, "app/p.yaml": patch(4_000_000),
				"app/kustomization.yaml": "resources:\n- cms.yaml\npatches:\n- path: p.yaml\n"},
		},
		"a large targeted patch over a few resources": {
			files: map[string]string{"app/cms.yaml": configMaps(3, "cm"), "app/p.yaml": patch(4_000_000),
				"app/kustomization.yaml": "resources:\n- cms.yaml\npatches:\n- path: p.yaml\n  target:\n    kind: ConfigMap\n"},
		},
		"a large targeted patch over every resource": {
			files: map[string]string{"app/cms.yaml": cms, "app/p.yaml": patch(100_000),
				"app/kustomization.yaml": "resources:\n- cms.yaml\npatches:\n- path: p.yaml\n  target:\n    kind: ConfigMap\n"},
			want: "kustomization app: its transformers would set about 90061200 bytes over the resources they apply to (those of app/kustomization.yaml: 100068 bytes, each set on up to 900 resources), at most 16777216",
		},
		"a large annotation in a base": {
			files: map[string]string{"base/cms.yaml": cms, "app/kustomization.yaml": "resources:\n- ../base\n",
				"base/kustomization.yaml": "resources:\n- cms.yaml\ncommonAnnotations:\n  a: " + strings.Repeat("x", 50_000) + "\n"},
			want: "(those of base/kustomization.yaml: 50001 bytes, each set on up to 900 resources)",
		},
		"a base included twice holds its resources twice": {
			files: map[string]string{"base/cms.yaml": configMaps(400, "cm"),
				"base/kustomization.yaml": "resources:\n- cms.yaml\n",
				"a/kustomization.yaml":    "resources:\n- ../base\nnamePrefix: a-\n", "b/kustomization.yaml": "resources:\n- ../base\nnamePrefix: b-\n",
				"app/kustomization.yaml": "resources:\n- ../a\n- ../b\ncommonLabels:\n  l: " + strings.Repeat("x", 30_000) + "\n"},
			want: "(those of app/kustomization.yaml: 30001 bytes, each set on up to 800 resources)",
		},
		"a component's annotation over the resources of the kustomization including it": {
			files: map[string]string{"app/cms.yaml": cms, "app/kustomization.yaml": "resources:\n- cms.yaml\ncomponents:\n- ../comp\n",
				"comp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonAnnotations:\n  a: " + strings.Repeat("x", 50_000) + "\n"},
			want: "(those of comp/kustomization.yaml: 50001 bytes, each set on up to 900 resources)",
		},
		"the Application's own annotation": {
			files: map[string]string{"app/cms.yaml": cms, "app/kustomization.yaml": "resources:\n- cms.yaml\n"},
			opts:  KustomizeOptions{CommonAnnotations: map[string]string{"a": strings.Repeat("x", 50_000)}},
			want:  "(those of app/kustomization.yaml: 50001 bytes, each set on up to 900 resources)",
		},
		"the Application's own component": {
			files: map[string]string{"app/cms.yaml": cms, "app/kustomization.yaml": "resources:\n- cms.yaml\n",
				"comp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nnamePrefix: " + strings.Repeat("x", 50_000) + "\n"},
			components: []string{"../comp"},
			want:       "(those of comp/kustomization.yaml: 50000 bytes, each set on up to 900 resources)",
		},
		"a transformer configuration over every resource": {
			files: map[string]string{"app/cms.yaml": cms, "app/kustomization.yaml": "resources:\n- cms.yaml\ntransformers:\n- t.yaml\n",
				"app/t.yaml": "apiVersion: builtin\nkind: AnnotationsTransformer\nmetadata:\n  name: a\nannotations:\n  a: " + strings.Repeat("x", 50_000) + "\nfieldSpecs:\n- path: metadata/annotations\n  create: true\n"},
			want: "(those of app/kustomization.yaml: 50144 bytes, each set on up to 900 resources)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr, err := openTree(testtree.Write(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.reachKustomization("app", tc.components); err != nil {
				t.Fatal(err)
			}
			err = tr.checkTransformWork("app", tc.opts, tc.components)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				return
			case err == nil:
				t.Fatalf("not refused, want: %s", tc.want)
			}
			ref, ok := err.(*Refusal)
			if !ok || ref.Code != CodeTooLarge || !strings.Contains(ref.Reason, tc.want) {
				t.Fatalf("got %v\nwant refused (%s) with: %s", err, CodeTooLarge, tc.want)
			}
		})
	}
}
