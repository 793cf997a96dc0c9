// Package chartrepotest serves Helm charts for tests as the two kinds of
// repository hold them: a chart repository (each chart packaged with the Helm
// SDK and listed with its digest in an index.yaml) and an OCI registry (each
// chart pushed by Helm's registry client, as helm push stores it).
package chartrepotest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

// Package packages every chart folder of dir with the Helm SDK, as helm package
// does, and returns the archives.
func Package(tb testing.TB, dir string) [][]byte {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var archives [][]byte
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
		archives = append(archives, data)
	}
	return archives
}

// Serve serves every chart folder of dir (a render golden's repository/ with
// its <name>-<version>/ folders, say) on the loopback interface until the test
// ends. Files are found by their base name at any path, so a repository named at
// another URL path (or another host, through a client that sends everything
// here) is served too.
func Serve(tb testing.TB, dir string) *httptest.Server {
	tb.Helper()
	idx := repo.NewIndexFile()
	files := map[string][]byte{}
	for _, data := range Package(tb, dir) {
		md := load(tb, data).Metadata
		file := md.Name + "-" + md.Version + ".tgz"
		sum := sha256.Sum256(data)
		if err := idx.MustAdd(md, file, "", "sha256:"+hex.EncodeToString(sum[:])); err != nil {
			tb.Fatal(err)
		}
		files[file] = data
	}
	var err error
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

// ServeOCI serves an OCI registry over plain HTTP on the loopback interface
// until the test ends, holding each archive as Helm's registry client pushes it:
// the manifest tagged with the chart's version (a "+" written "_", as helm push
// tags it) in the repository <under>/<chart name>. It returns the registry's
// host (127.0.0.1:port).
func ServeOCI(tb testing.TB, under string, archives ...[]byte) string {
	tb.Helper()
	host, c := serveRegistry(tb)
	for _, data := range archives {
		md := load(tb, data).Metadata
		if _, err := c.Push(data, host+"/"+path.Join(under, md.Name)+":"+md.Version); err != nil {
			tb.Fatalf("push %s %s: %v", md.Name, md.Version, err)
		}
	}
	return host
}

// ServeOCITagged is ServeOCI with each archive (tag -> archive) pushed at the
// tag given, whatever its chart's version, as a registry's own tools can tag
// it (v1.2.3 holding a chart 1.2.3).
func ServeOCITagged(tb testing.TB, under string, tagged map[string][]byte) string {
	tb.Helper()
	host, c := serveRegistry(tb)
	for tag, data := range tagged {
		md := load(tb, data).Metadata
		if _, err := c.Push(data, host+"/"+path.Join(under, md.Name)+":"+tag, registry.PushOptStrictMode(false)); err != nil {
			tb.Fatalf("push %s %s at %s: %v", md.Name, md.Version, tag, err)
		}
	}
	return host
}

// serveRegistry serves an empty registry and returns its host and a client
// pushing to it.
func serveRegistry(tb testing.TB) (string, *registry.Client) {
	tb.Helper()
	srv := httptest.NewServer(ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))))
	tb.Cleanup(srv.Close)
	// A credentials file of the test's own, so that no login of the machine
	// running it is read.
	c, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(filepath.Join(tb.TempDir(), "config.json")))
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimPrefix(srv.URL, "http://"), c
}

func load(tb testing.TB, archive []byte) *chart.Chart {
	tb.Helper()
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		tb.Fatal(err)
	}
	return ch
}
