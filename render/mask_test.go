package render

import (
	"context"
	"strings"
	"testing"
)

const secretsNearby = `apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  password: s3cr3t-value-1
  dsn: |
    postgres://user:s3cr3t-value-2@db/app
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  LOG_LEVEL: info
  api_token: s3cr3t-value-3
  PrivateKey: s3cr3t-value-4
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: ghcr.io/example/web:1.0.0
`

func TestMaskFileLines(t *testing.T) {
	out := strings.Join(maskFileLines([]byte(secretsNearby)), "")
	for _, v := range []string{"s3cr3t-value-1", "s3cr3t-value-2", "s3cr3t-value-3", "s3cr3t-value-4"} {
		if strings.Contains(out, v) {
			t.Errorf("masked file still shows %s:\n%s", v, out)
		}
	}
	for _, keep := range []string{"password: [redacted]", "api_token: [redacted]", "LOG_LEVEL: info", "name: db", "---", "replicas: 2"} {
		if !strings.Contains(out, keep) {
			t.Errorf("masked file lost %q:\n%s", keep, out)
		}
	}
	if got, want := len(maskFileLines([]byte(secretsNearby))), strings.Count(secretsNearby, "\n"); got != want {
		t.Errorf("masking changed the line count: %d, want %d", got, want)
	}
}

// TestSecretValuesNeverShown edits a document next to a Secret and a ConfigMap and
// requires that no output of Plan shows their values.
func TestSecretValuesNeverShown(t *testing.T) {
	// Put the secrets right after the edited line so they fall in the diff context.
	content := strings.Replace(secretsNearby, "apiVersion: apps/v1", "", 1)
	content = "apiVersion: apps/v1" + content[strings.Index(content, "\nkind: Deployment"):] + "---\n" + secretsNearby[:strings.Index(secretsNearby, "---\napiVersion: apps/v1")]
	repo := writeRepo(t, map[string]string{"apps/web/all.yaml": content})
	res, err := Plan(context.Background(), Request{RepoDir: repo,
		Apps:   []Application{{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"}},
		Target: Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Image: &Image{Container: "web", Tag: "1.0.1"}}})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if !strings.Contains(res.GitDiff, "kind: Secret") {
		t.Fatalf("the test needs the Secret in the diff context:\n%s", res.GitDiff)
	}
	all := res.GitDiff
	for _, d := range res.ClusterDiff {
		all += d.Diff
		for _, c := range d.Changes {
			all += c.Before + c.After
		}
	}
	for _, w := range res.Warnings {
		all += w.String()
	}
	for _, v := range []string{"s3cr3t-value-1", "s3cr3t-value-2", "s3cr3t-value-3", "s3cr3t-value-4"} {
		if strings.Contains(all, v) {
			t.Errorf("output shows secret value %s:\n%s", v, all)
		}
	}
}

func TestMaskBodyAndDifferences(t *testing.T) {
	secret := &object{apiVersion: "v1", kind: "Secret", name: "db", body: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "db"},
		"data":     map[string]any{"password": "c2VjcmV0"},
	}}
	after := deepCopy(secret.body).(map[string]any)
	after["data"].(map[string]any)["password"] = "bmV3LXNlY3JldA=="
	var diffs []difference
	compareValues(nil, secret.body, after, &diffs, 10)
	lines := strings.Join(describeDifferences(secret, diffs), "\n")
	if strings.Contains(lines, "c2VjcmV0") || strings.Contains(lines, "bmV3LXNlY3JldA") || !strings.Contains(lines, "data.password") {
		t.Fatalf("differences leak or lose the path: %s", lines)
	}
	d := objectDiff("app", objKey{Kind: "Secret", Name: "db"}, secret, &object{apiVersion: "v1", kind: "Secret", name: "db", body: after})
	if strings.Contains(d.Diff, "c2VjcmV0") || strings.Contains(d.Diff, "bmV3LXNlY3JldA") {
		t.Fatalf("object diff leaks a secret:\n%s", d.Diff)
	}
}
