package argocd

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestKustomizeOptionsNotReadAreRecorded(t *testing.T) {
	cases := map[string]struct {
		kustomize string
		want      []string
	}{
		"only options we read": {
			kustomize: `{"namePrefix":"canary-","images":["web=web:2"],"version":"v5.4.3"}`,
		},
		"options written but not in effect": {
			kustomize: `{"namePrefix":"a-","forceCommonLabels":false,"patches":[],"commonAnnotationsEnvsubst":null}`,
		},
		"every option of Argo CD 3.6 is read, a later one is not": {
			kustomize: `{"namePrefix":"a-","patches":[{"patch":"- op: remove\n  path: /spec/replicas"}],"forceCommonLabels":true,
"forceCommonAnnotations":true,"labelWithoutSelector":true,"labelIncludeTemplates":true,"commonAnnotationsEnvsubst":true,
"ignoreMissingComponents":true,"kubeVersion":"1.30","apiVersions":["v1"],"laterOption":true}`,
			want: []string{"laterOption"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"web","namespace":"argocd"},
"spec":{"source":{"repoURL":"https://github.com/acme/deploy","path":"apps/web","kustomize":` + tc.kustomize + `},"destination":{"namespace":"web"}}}`
			fromJSON, err := DecodeApplication([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := fromJSON.Spec.Source.Kustomize.Unsupported; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("from JSON: unsupported = %v, want %v", got, tc.want)
			}
			obj, err := decodeMap(doc)
			if err != nil {
				t.Fatal(err)
			}
			fromMap, err := ParseApplication(obj)
			if err != nil {
				t.Fatal(err)
			}
			if got := fromMap.Spec.Source.Kustomize.Unsupported; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("from unstructured: unsupported = %v, want %v", got, tc.want)
			}
		})
	}
}

func decodeMap(doc string) (map[string]any, error) {
	var obj map[string]any
	return obj, json.Unmarshal([]byte(doc), &obj)
}
