package render

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestMaskedFile(t *testing.T) {
	fsys := fstest.MapFS{
		"app/kustomization.yaml": {Data: []byte("resources:\n- secret.yaml\n- deploy.yaml\nsecretGenerator:\n- name: creds\n  envs:\n  - creds.env\n")},
		"app/creds.env":          {Data: []byte("USER=admin\nPASSWORD=kkGeneratedEnv01\n")},
		"app/secret.yaml":        {Data: []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: kkSecretString1\n")},
		"app/deploy.yaml": {Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n" +
			"        env:\n        - name: API_TOKEN\n          value: kkTokenInEnv0001\n        - name: LOG_LEVEL\n          value: debug\n")},
	}
	for name, tc := range map[string]struct {
		file   string
		hidden string
		kept   string
	}{
		"secretGenerator env file": {file: "app/creds.env", hidden: "kkGeneratedEnv01", kept: "PASSWORD="},
		"Secret manifest":          {file: "app/secret.yaml", hidden: "kkSecretString1", kept: "kind: Secret"},
		"secret-looking env value": {file: "app/deploy.yaml", hidden: "kkTokenInEnv0001", kept: "value: debug"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MaskedFile(fsys, tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(got, tc.hidden) || !strings.Contains(got, tc.kept) {
				t.Fatalf("masked %s:\n%s\nwant %q hidden and %q kept", tc.file, got, tc.hidden, tc.kept)
			}
			if strings.Count(got, "\n") != strings.Count(string(fsys[tc.file].Data), "\n") {
				t.Fatalf("masking changed the line count:\n%s", got)
			}
		})
	}
	if _, err := MaskedFile(fsys, "app/missing.yaml"); err == nil {
		t.Fatal("a missing file read without error")
	}
}

func TestMaskedManifests(t *testing.T) {
	objs := []Object{
		{Manifest: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db"},
			"data": map[string]any{"password": "a2tTZWNyZXREYXRhMDE="}, "stringData": map[string]any{"token": "kkSecretString1"}}},
		{Manifest: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
			"spec": map[string]any{"replicas": 2, "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"name": "web", "env": []any{map[string]any{"name": "API_TOKEN", "value": "kkTokenInEnv0001"}, map[string]any{"name": "MODE", "value": "fast"}}}}}}}}},
	}
	got, err := MaskedManifests(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, hidden := range []string{"a2tTZWNyZXREYXRhMDE=", "kkSecretString1", "kkTokenInEnv0001"} {
		if strings.Contains(got, hidden) {
			t.Errorf("masked manifests show %q:\n%s", hidden, got)
		}
	}
	for _, kept := range []string{"kind: Secret", "password:", "replicas: 2", "value: fast", "\n---\n"} {
		if !strings.Contains(got, kept) {
			t.Errorf("masked manifests lack %q:\n%s", kept, got)
		}
	}
	if objs[0].Manifest["stringData"].(map[string]any)["token"] != "kkSecretString1" {
		t.Error("masking changed the render's own objects")
	}
}
