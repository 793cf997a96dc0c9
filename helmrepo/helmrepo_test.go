package helmrepo_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/render"
)

// packageChart packages a chart of name and version whose one template is a
// Deployment taking its replicas from the values, with the Helm SDK, and
// returns the archive.
func packageChart(t testing.TB, name, version string) []byte {
	t.Helper()
	ch := &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version},
		Values:    map[string]any{"replicas": 1},
		Templates: []*common.File{{Name: "templates/deploy.yaml", Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\nspec:\n  replicas: {{ .Values.replicas }}\n")}},
	}
	return saveChart(t, ch)
}

// saveChart is the archive the Helm SDK packages ch into.
func saveChart(t testing.TB, ch *chart.Chart) []byte {
	t.Helper()
	p, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func loadArchive(t testing.TB, data []byte) *chart.Chart {
	t.Helper()
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// chartRepo is a chart repository on the loopback interface: an index.yaml and
// the archives it lists, each request counted by path.
type chartRepo struct {
	*httptest.Server
	mu       sync.Mutex
	files    map[string][]byte
	requests map[string]int
}

// newChartRepo serves archives (file name -> bytes) with an index that gives
// each its digest, or the digest of digests[file] when set.
func newChartRepo(t *testing.T, archives map[string][]byte, digests map[string][]byte, urls map[string]string) *chartRepo {
	t.Helper()
	r := &chartRepo{files: map[string][]byte{}, requests: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests[req.URL.Path]++
		data, ok := r.files[strings.TrimPrefix(req.URL.Path, "/charts/")]
		r.mu.Unlock()
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(r.Close)
	idx := repo.NewIndexFile()
	for file, data := range archives {
		ch := loadArchive(t, data)
		digestOf := data
		if d, ok := digests[file]; ok {
			digestOf = d
		}
		sum := sha256.Sum256(digestOf)
		if err := idx.MustAdd(ch.Metadata, file, "", "sha256:"+hex.EncodeToString(sum[:])); err != nil {
			t.Fatal(err)
		}
		if u, ok := urls[file]; ok {
			cv := idx.Entries[ch.Metadata.Name][len(idx.Entries[ch.Metadata.Name])-1]
			cv.URLs = []string{u}
		}
		r.files[file] = data
	}
	out, err := yaml.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	r.files["index.yaml"] = out
	return r
}

func (r *chartRepo) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[path]
}

// The archive a Chart.lock pins comes from the repository's index, checked
// against the digest the index gives, and is read once: the second fetch is
// answered from the cache.
func TestFetchFromChartRepository(t *testing.T) {
	archive := packageChart(t, "cache", "1.2.3")
	r := newChartRepo(t, map[string][]byte{"cache-1.2.3.tgz": archive}, nil, nil)
	f := helmrepo.New(helmrepo.WithLoopback())
	dep := render.ChartDependency{Repository: r.URL + "/charts", Name: "cache", Version: "1.2.3"}
	for range 2 {
		got, err := f.FetchChart(context.Background(), dep)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(archive) {
			t.Fatal("the fetched archive is not the repository's")
		}
	}
	if n := r.count("/charts/cache-1.2.3.tgz"); n != 1 {
		t.Fatalf("the archive was downloaded %d times, want once", n)
	}
	if n := r.count("/charts/index.yaml"); n != 1 {
		t.Fatalf("the index was read %d times within its TTL, want once", n)
	}
}

// Each way a dependency cannot be had is refused with the reason.
func TestFetchRefusals(t *testing.T) {
	archive := packageChart(t, "cache", "1.2.3")
	big := make([]byte, helmrepo.MaxArchiveBytes+1)
	good := newChartRepo(t, map[string][]byte{"cache-1.2.3.tgz": archive}, nil, nil)
	tampered := newChartRepo(t, map[string][]byte{"cache-1.2.3.tgz": archive}, map[string][]byte{"cache-1.2.3.tgz": []byte("another archive")}, nil)
	elsewhere := newChartRepo(t, map[string][]byte{"cache-1.2.3.tgz": archive}, nil, map[string]string{"cache-1.2.3.tgz": "https://cdn.example.com/cache-1.2.3.tgz"})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	cases := map[string]struct {
		dep      render.ChartDependency
		opts     []helmrepo.Option
		want     string
		tooLarge bool
	}{
		"a digest that does not match": {dep: render.ChartDependency{Repository: tampered.URL + "/charts", Name: "cache", Version: "1.2.3"},
			want: "the repository's index says sha256:"},
		"an unreachable repository": {dep: render.ChartDependency{Repository: closed.URL + "/charts", Name: "cache", Version: "1.2.3"},
			want: "the repository is unreachable"},
		"a version the index does not list": {dep: render.ChartDependency{Repository: good.URL + "/charts", Name: "cache", Version: "1.2.4"},
			want: "the repository's index lists no version 1.2.4 of cache"},
		"an archive on another host": {dep: render.ChartDependency{Repository: elsewhere.URL + "/charts", Name: "cache", Version: "1.2.3"},
			want: "the index serves the archive from cdn.example.com, another host than the repository's"},
		"a repository on this host": {dep: render.ChartDependency{Repository: good.URL + "/charts", Name: "cache", Version: "1.2.3"},
			opts: []helmrepo.Option{}, want: "is this host's own or link-local"},
		"a repository that is neither http nor oci": {dep: render.ChartDependency{Repository: "git://example.com/charts", Name: "cache", Version: "1.2.3"},
			want: "neither an http(s) chart repository nor an oci:// registry"},
	}
	bigIndexed := indexedRepo(t, "big", "1.0.0", big)
	cases["an oversized archive"] = struct {
		dep      render.ChartDependency
		opts     []helmrepo.Option
		want     string
		tooLarge bool
	}{dep: render.ChartDependency{Repository: bigIndexed.URL, Name: "big", Version: "1.0.0"}, want: "the archive of big 1.0.0 is more than 5242880 bytes", tooLarge: true}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := tc.opts
			if opts == nil {
				opts = []helmrepo.Option{helmrepo.WithLoopback()}
			}
			_, err := helmrepo.New(opts...).FetchChart(context.Background(), tc.dep)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if errors.Is(err, render.ErrChartTooLarge) != tc.tooLarge {
				t.Fatalf("%v: too large %v, want %v", err, errors.Is(err, render.ErrChartTooLarge), tc.tooLarge)
			}
		})
	}
}

// indexedRepo serves an index listing name at version with the digest of data,
// and data as its archive, whatever data holds.
func indexedRepo(t *testing.T, name, version string, data []byte) *httptest.Server {
	t.Helper()
	sum := sha256.Sum256(data)
	idx := repo.NewIndexFile()
	if err := idx.MustAdd(&chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version}, name+"-"+version+".tgz", "", "sha256:"+hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	index, err := yaml.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	return serveIndex(t, index, data)
}

// serveIndex serves index as index.yaml and data at every other path.
func serveIndex(tb testing.TB, index, data []byte) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "index.yaml") {
			_, _ = w.Write(index)
			return
		}
		_, _ = w.Write(data)
	}))
	tb.Cleanup(s.Close)
	return s
}

// blockingRepo is a chart repository serving archive as name at version whose
// index answers only once release is closed; arrived gets a value at each
// request of the index, and reads counts them.
type blockingRepo struct {
	*httptest.Server
	arrived chan struct{}
	release chan struct{}
	mu      sync.Mutex
	reads   int
}

func newBlockingRepo(t *testing.T, name, version string) *blockingRepo {
	t.Helper()
	inner := indexedRepo(t, name, version, packageChart(t, name, version))
	r := &blockingRepo{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "index.yaml") {
			r.mu.Lock()
			r.reads++
			r.mu.Unlock()
			r.arrived <- struct{}{}
			<-r.release
		}
		resp, err := http.Get(inner.URL + req.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *blockingRepo) indexReads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads
}

// Plans that render charts of one repository at once read its index once: a
// large index takes many times its size in memory while it parses, and each
// read is a request to the repository.
func TestConcurrentFetchesShareOneReadOfTheIndex(t *testing.T) {
	r := newBlockingRepo(t, "cache", "1.2.3")
	f := helmrepo.New(helmrepo.WithLoopback())
	dep := render.ChartDependency{Repository: r.URL, Name: "cache", Version: "1.2.3"}
	const fetches = 8
	errs := make(chan error, fetches)
	for range fetches {
		go func() {
			_, err := f.FetchChart(context.Background(), dep)
			errs <- err
		}()
	}
	<-r.arrived
	// The others have had their time to ask for the index too.
	time.Sleep(200 * time.Millisecond)
	close(r.release)
	for range fetches {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := r.indexReads(); n != 1 {
		t.Fatalf("%d concurrent fetches read the index %d times, want once", fetches, n)
	}
}

// A fetch that stops waiting for the index (its plan cancelled) does not fail
// the fetches waiting on the same read.
func TestACancelledFetchLeavesTheIndexReadToTheOthers(t *testing.T) {
	r := newBlockingRepo(t, "cache", "1.2.3")
	f := helmrepo.New(helmrepo.WithLoopback())
	dep := render.ChartDependency{Repository: r.URL, Name: "cache", Version: "1.2.3"}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := f.FetchChart(ctx, dep)
		first <- err
	}()
	<-r.arrived
	second := make(chan error, 1)
	go func() {
		_, err := f.FetchChart(context.Background(), dep)
		second <- err
	}()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled fetch: %v, want context.Canceled", err)
	}
	close(r.release)
	if err := <-second; err != nil {
		t.Fatalf("the fetch that kept waiting: %v", err)
	}
	// Whether the second fetch joined the read before the first was cancelled
	// or after, the read it waited on is the first one: had the cancel ended
	// that read, the second would have failed or read the index again.
	if n := r.indexReads(); n != 1 {
		t.Fatalf("the index was read %d times, want once", n)
	}
}

// The indexes kept are bounded in number: once more repositories than
// MaxCachedIndexes were read, the first one's index is read again.
func TestIndexesKeptAreBounded(t *testing.T) {
	f := helmrepo.New(helmrepo.WithLoopback())
	archive := packageChart(t, "cache", "1.2.3")
	var first *chartRepo
	for i := range helmrepo.MaxCachedIndexes + 1 {
		r := newChartRepo(t, map[string][]byte{"cache-1.2.3.tgz": archive}, nil, nil)
		if i == 0 {
			first = r
		}
		if _, err := f.FetchChart(context.Background(), render.ChartDependency{Repository: r.URL + "/charts", Name: "cache", Version: "1.2.3"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.FetchChart(context.Background(), render.ChartDependency{Repository: first.URL + "/charts", Name: "cache", Version: "1.2.3"}); err != nil {
		t.Fatal(err)
	}
	if n := first.count("/charts/index.yaml"); n != 2 {
		t.Fatalf("the first repository's index was read %d times after %d others, want twice", n, helmrepo.MaxCachedIndexes)
	}
}

// An Application's chart version is found in the index as "helm pull
// --version" finds it for Argo CD's repo server: the entry listed as written,
// else the first of the index (newest first) with the same semantic version, a
// leading v and build metadata aside; a pre-release is another version. The pick
// is the one Helm's own index makes from the index the repository serves.
func TestFetchFindsAVersionAsHelmDoes(t *testing.T) {
	cases := map[string]struct {
		published []string
		asked     string
		want      string   // "" when no version matches
		among     []string // the versions equally matching, of which the index's order decides
	}{
		"a leading v the repository does not publish": {published: []string{"1.14.4"}, asked: "v1.14.4", want: "1.14.4"},
		"a leading v the repository publishes":        {published: []string{"v1.14.4"}, asked: "1.14.4", want: "v1.14.4"},
		"both, asked with a v":                        {published: []string{"v1.2.3", "1.2.3"}, asked: "v1.2.3", want: "v1.2.3"},
		"both, asked without":                         {published: []string{"v1.2.3", "1.2.3"}, asked: "1.2.3", want: "1.2.3"},
		"build metadata the request does not give":    {published: []string{"1.2.3+build.1"}, asked: "1.2.3", want: "1.2.3+build.1"},
		"build metadata the repository does not give": {published: []string{"1.2.3"}, asked: "1.2.3+build.1", want: "1.2.3"},
		"two builds of one version":                   {published: []string{"1.2.3+build.1", "1.2.3+build.2", "1.2.4"}, asked: "v1.2.3", among: []string{"1.2.3+build.1", "1.2.3+build.2"}},
		// Sorting more than twelve entries, Helm does not keep the index's
		// order of equal versions: the pick follows its sort.
		"many builds of one version":   {published: append(builds("1.2.3", 8), builds("1.2.4", 8)...), asked: "1.2.3", among: builds("1.2.3", 8)},
		"a pre-release of the version": {published: []string{"1.2.3-rc.1"}, asked: "1.2.3"},
		"the version of a pre-release": {published: []string{"1.2.3"}, asked: "1.2.3-rc.1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			archives := map[string][]byte{}
			for _, v := range tc.published {
				archives["cache-"+v+".tgz"] = packageChart(t, "cache", v)
			}
			r := newChartRepo(t, archives, nil, nil)
			want := helmPick(t, r.files["index.yaml"], "cache", tc.asked)
			if want != tc.want && !slices.Contains(tc.among, want) {
				t.Fatalf("Helm picks %q of %v for %s, the case says %q", want, tc.published, tc.asked, tc.want+strings.Join(tc.among, " or "))
			}
			got, err := helmrepo.New(helmrepo.WithLoopback()).FetchChart(context.Background(), render.ChartDependency{Repository: r.URL + "/charts", Name: "cache", Version: tc.asked})
			if want == "" {
				if err == nil || !strings.Contains(err.Error(), "the repository's index lists no version "+tc.asked+" of cache") {
					t.Fatalf("got %v, want no version found", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v := loadArchive(t, got).Metadata.Version; v != want {
				t.Fatalf("fetched %s for %s, Helm pulls %s", v, tc.asked, want)
			}
		})
	}
}

// builds is n builds of version: version+build.1 and on.
func builds(version string, n int) []string {
	var vs []string
	for i := range n {
		vs = append(vs, fmt.Sprintf("%s+build.%d", version, i+1))
	}
	return vs
}

// helmPick is the version of name that Helm's index, loaded from index as
// "helm pull" loads it, gives for version, or "" for none.
func helmPick(t *testing.T, index []byte, name, version string) string {
	t.Helper()
	cv, err := helmIndex(t, index).Get(name, version)
	if err != nil {
		return ""
	}
	return cv.Version
}

// helmIndex is index loaded as "helm pull" loads it.
func helmIndex(t *testing.T, index []byte) *repo.IndexFile {
	t.Helper()
	p := filepath.Join(t.TempDir(), "index.yaml")
	if err := os.WriteFile(p, index, 0o600); err != nil {
		t.Fatal(err)
	}
	idx, err := repo.LoadIndexFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// An index is read again once IndexTTL has passed: a repository publishes new
// versions, and a plan must see them within the TTL.
func TestAnIndexIsReadAgainAfterItsTTL(t *testing.T) {
	archive := packageChart(t, "cache", "1.2.3")
	r := newChartRepo(t, map[string][]byte{"cache-1.2.3.tgz": archive}, nil, nil)
	f := helmrepo.New(helmrepo.WithLoopback())
	now := time.Now()
	helmrepo.SetClock(f, func() time.Time { return now })
	dep := render.ChartDependency{Repository: r.URL + "/charts", Name: "cache", Version: "1.2.3"}
	for _, step := range []time.Duration{0, helmrepo.IndexTTL - time.Second, 2 * time.Second} {
		now = now.Add(step)
		if _, err := f.FetchChart(context.Background(), dep); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.count("/charts/index.yaml"); n != 2 {
		t.Fatalf("the index was read %d times over a TTL and a second, want twice", n)
	}
}

// A Fetcher leaves no goroutine running: tests and tools make many.
func TestFetchersLeaveNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	const fetchers = 50
	for range fetchers {
		helmrepo.New()
	}
	if grown := runtime.NumGoroutine() - before; grown >= fetchers {
		t.Fatalf("%d fetchers left %d goroutines running", fetchers, grown)
	}
}

// An index is read as "helm pull" loads it: YAML strictly (an unknown field,
// a key given twice, and Helm refuses the whole index, so Argo CD renders
// nothing of it), JSON as Go decodes it (failed before: both YAML indexes were
// read and their charts rendered).
func TestFetchReadsTheIndexAsHelmLoadsIt(t *testing.T) {
	archive := packageChart(t, "cache", "1.2.3")
	sum := sha256.Sum256(archive)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	cases := map[string]struct {
		index string
		loads bool
	}{
		"YAML": {
			index: "apiVersion: v1\nentries:\n  cache:\n  - apiVersion: v2\n    name: cache\n    version: 1.2.3\n    digest: " + digest + "\n    urls: [cache-1.2.3.tgz]\n",
			loads: true,
		},
		"YAML with a field Helm does not know": {
			index: "apiVersion: v1\nentries:\n  cache:\n  - apiVersion: v2\n    name: cache\n    version: 1.2.3\n    digest: " + digest + "\n    urls: [cache-1.2.3.tgz]\n    mirror: cache-1.2.3.tgz\n",
		},
		"YAML giving a key twice": {
			index: "apiVersion: v1\nentries:\n  cache:\n  - apiVersion: v2\n    name: cache\n    version: 1.2.3\n    version: 1.2.3\n    digest: " + digest + "\n    urls: [cache-1.2.3.tgz]\n",
		},
		"JSON with a field Helm does not know": {
			index: `{"apiVersion": "v1", "entries": {"cache": [{"apiVersion": "v2", "name": "cache", "version": "1.2.3", "digest": "` + digest + `", "urls": ["cache-1.2.3.tgz"], "mirror": "cache-1.2.3.tgz"}]}}`,
			loads: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "index.yaml")
			if err := os.WriteFile(p, []byte(tc.index), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := repo.LoadIndexFile(p); (err == nil) != tc.loads {
				t.Fatalf("Helm loads the index: %v, the case says %v", err, tc.loads)
			}
			s := serveIndex(t, []byte(tc.index), archive)
			_, err := helmrepo.New(helmrepo.WithLoopback()).FetchChart(context.Background(), render.ChartDependency{Repository: s.URL, Name: "cache", Version: "1.2.3"})
			if tc.loads && err != nil {
				t.Fatal(err)
			}
			if !tc.loads && (err == nil || !strings.Contains(err.Error(), "does not parse")) {
				t.Fatalf("got %v, want the index refused as Helm refuses it", err)
			}
		})
	}
}

// A version an index lists more than once as written (a chart published
// again under the same version) is found as Helm finds it: the first of them
// in the order Helm sorts the index, which, sorting more than twelve entries,
// is not the index's own (failed before: the first listed was fetched, copy 0
// where Helm pulls copy 8).
func TestFetchFindsAVersionListedTwiceAsHelmDoes(t *testing.T) {
	const copies = 16
	idx := repo.NewIndexFile()
	files := map[string][]byte{}
	for i := range copies {
		ch := &chart.Chart{
			Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "cache", Version: []string{"1.2.3", "1.2.4"}[i%2]},
			Raw:      []*common.File{{Name: "values.yaml", Data: fmt.Appendf(nil, "copy: %d\n", i)}},
		}
		data := saveChart(t, ch)
		file := fmt.Sprintf("cache-%s-%d.tgz", ch.Metadata.Version, i)
		files[file] = data
		sum := sha256.Sum256(data)
		if err := idx.MustAdd(ch.Metadata, file, "", "sha256:"+hex.EncodeToString(sum[:])); err != nil {
			t.Fatal(err)
		}
	}
	index, err := yaml.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := helmIndex(t, index).Get("cache", "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "index.yaml") {
			_, _ = w.Write(index)
			return
		}
		_, _ = w.Write(files[strings.TrimPrefix(r.URL.Path, "/")])
	}))
	t.Cleanup(s.Close)
	got, err := helmrepo.New(helmrepo.WithLoopback()).FetchChart(context.Background(), render.ChartDependency{Repository: s.URL, Name: "cache", Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, files[cv.URLs[0]]) {
		t.Fatalf("fetched copy %v of cache 1.2.3, Helm pulls %s", loadArchive(t, got).Values["copy"], cv.URLs[0])
	}
}

// panickingTransport panics at every request, as a fault of the HTTP client's
// middleware, or of what decodes an index, would.
type panickingTransport struct{}

func (panickingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	panic("the transport failed")
}

// A panic while an index is read fails the fetches sharing the read, as it
// fails the one request a server recovers it in; it does not end the process,
// as a panic in a shared read otherwise does (failed before: the test binary
// died).
func TestAPanicReadingAnIndexFailsTheFetch(t *testing.T) {
	f := helmrepo.New(helmrepo.WithHTTPClient(&http.Client{Transport: panickingTransport{}}))
	_, err := f.FetchChart(context.Background(), render.ChartDependency{Repository: "https://charts.example.com", Name: "cache", Version: "1.2.3"})
	if err == nil || !strings.Contains(err.Error(), "the transport failed") {
		t.Fatalf("got %v, want the fetch failed by the panic", err)
	}
}
