// Package chartrepotest serves Helm chart repositories for tests: each chart
// folder of a directory packaged with the Helm SDK and listed with its digest in
// an index.yaml, as a chart repository serves its charts.
package chartrepotest

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

// Serve serves every chart folder of dir (a render golden's repository/ with
// its <name>-<version>/ folders, say) on the loopback interface until the test
// ends. Files are found by their base name at any path, so a repository named at
// another URL path (or another host, through a client that sends everything
// here) is served too.
func Serve(tb testing.TB, dir string) *httptest.Server {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	idx := repo.NewIndexFile()
	files := map[string][]byte{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ch, err := loader.LoadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatalf("chart %s: %v", e.Name(), err)
		}
		archive, err := chartutil.Save(ch, tb.TempDir())
		if err != nil {
			tb.Fatal(err)
		}
		data, err := os.ReadFile(archive)
		if err != nil {
			tb.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if err := idx.MustAdd(ch.Metadata, filepath.Base(archive), "", "sha256:"+hex.EncodeToString(sum[:])); err != nil {
			tb.Fatal(err)
		}
		files[filepath.Base(archive)] = data
	}
	if files["index.yaml"], err = yaml.Marshal(idx); err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[path.Base(r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	tb.Cleanup(srv.Close)
	return srv
}
