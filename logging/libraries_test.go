package logging

import (
	"bufio"
	"encoding/json"
	stdlog "log"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kukie/kukie-gitops/internal/servicetest"
)

// Kustomize prints a warning to os.Stderr for each deprecated field it builds;
// captured, each is one structured warn entry and nothing reaches stderr raw. So
// is a line of the standard logger.
func TestLibraryOutputLogsKustomizeWarnings(t *testing.T) {
	raw, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	savedStderr, savedLog := os.Stderr, stdlog.Writer()
	os.Stderr = raw
	stdlog.SetOutput(raw)
	t.Cleanup(func() {
		os.Stderr = savedStderr
		stdlog.SetOutput(savedLog)
	})

	var first, logged servicetest.SyncBuffer
	o, err := CaptureLibraryOutput(zerolog.New(&first))
	if err != nil {
		t.Fatal(err)
	}
	o.Use(zerolog.New(&logged))
	fs := filesys.MakeFsInMemory()
	for name, content := range map[string]string{
		"app/kustomization.yaml": "commonLabels:\n  team: shop\nresources:\n  - cm.yaml\npatchesStrategicMerge:\n  - patch.yaml\n",
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n",
		"app/patch.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: w\n",
	} {
		if err := fs.WriteFile(name, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "app"); err != nil {
		t.Fatal(err)
	}
	stdlog.Printf("a library says %s", "hello")
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	if os.Stderr != raw || stdlog.Writer() != raw {
		t.Fatal("Close did not restore os.Stderr and the standard logger")
	}
	if b, err := os.ReadFile(raw.Name()); err != nil || len(b) != 0 {
		t.Fatalf("raw stderr got %q (%v), want nothing", b, err)
	}
	if first.String() != "" {
		t.Fatalf("lines went to the logger replaced by Use: %s", first.String())
	}
	want := map[string]string{
		"'commonLabels' is deprecated":          "kustomize",
		"'patchesStrategicMerge' is deprecated": "kustomize",
		"a library says hello":                  "log",
	}
	sc := bufio.NewScanner(strings.NewReader(logged.String()))
	for sc.Scan() {
		var e struct{ Level, Component, Message string }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("not a JSON log line: %q", sc.Text())
		}
		for text, component := range want {
			if strings.Contains(e.Message, text) && e.Component == component && e.Level == "warn" && !strings.HasPrefix(e.Message, "#") {
				delete(want, text)
			}
		}
	}
	if len(want) > 0 {
		t.Fatalf("no warn entry for %v in:\n%s", want, logged.String())
	}
}
