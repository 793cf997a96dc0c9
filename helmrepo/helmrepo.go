// Package helmrepo fetches the chart archives that a chart's Chart.lock pins,
// and the charts Applications deploy from Helm repositories, from the Helm chart
// repository (its index.yaml over HTTP(S)) or the OCI registry named, for render
// to load them as "helm dependency build" would have vendored them, and as Argo
// CD's repo server pulls them (render.ChartSource). A version is found as Helm
// finds it for Argo CD: in an index, the entry listed as written, else the
// newest of the same semantic version (1.14.4 for v1.14.4, see
// render.ChartVersionMatch); in an OCI registry, the tag as written.
//
// It talks to no host but the one a Chart.lock entry or an Application names:
// an archive URL of an index on another host, and a redirect to one, are
// refused. Every answer is
// read under a size bound (MaxIndexBytes, MaxArchiveBytes, MaxManifestBytes) and
// every archive is checked against the digest its repository publishes (the
// index's digest, the registry's content digest) before render sees a byte.
// Archives are kept in memory by repository, name, version and digest, indexes
// for IndexTTL, both in bounded numbers. It sends no credentials: a repository that asks for them is
// refused, naming it.
package helmrepo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/Masterminds/semver/v3"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/netguard"
	"github.com/kukie/kukie-gitops/render"
)

// Bounds of what one answer may hold.
const (
	// MaxIndexBytes is the largest index.yaml read: those of the largest public
	// repositories are a few MiB.
	MaxIndexBytes = 16 << 20
	// MaxArchiveBytes is the largest chart archive read, the largest file render
	// reads from a repository.
	MaxArchiveBytes = render.MaxFileSize
	// MaxManifestBytes is the largest OCI manifest read.
	MaxManifestBytes = 1 << 20
	// IndexTTL is how long an index is reused: a plan renders a chart many times.
	IndexTTL = time.Minute
	// cachedArchives bounds the archives kept (each at most MaxArchiveBytes).
	cachedArchives = 64
	// MaxCachedIndexes bounds the indexes kept, each reduced to what a fetch
	// reads (names, versions, digests, URLs): without a bound, every repository
	// any Chart.lock ever named would stay in memory.
	MaxCachedIndexes = 32
	// requestTimeout bounds one request.
	requestTimeout = 20 * time.Second
)

// Fetcher fetches chart dependencies (render.ChartSource). The zero value is
// not ready; use New.
type Fetcher struct {
	client *http.Client
	// plainHTTP reaches OCI registries over HTTP (tests).
	plainHTTP bool
	// loopback allows addresses of this host (tests).
	loopback bool

	archives *lru.Cache[archiveKey, []byte]
	indexes  *lru.Cache[string, cachedIndex]
	// indexReads makes concurrent fetches from one repository share one read
	// of its index.
	indexReads singleflight.Group
	// indexParses lets one index be parsed at a time: while it parses, an
	// index takes tens of times its size in memory (BenchmarkFetchFromALargeIndex),
	// so plans on many repositories at once must not each hold one.
	indexParses chan struct{}
	// now is the clock indexes age by.
	now func() time.Time
}

type archiveKey struct{ repository, name, version, digest string }

// cachedIndex is an index and when it was read. Its age is judged when it is
// looked up, so that no goroutine of a Fetcher outlives its use (an expiring
// cache's cleaner would).
type cachedIndex struct {
	index *repo.IndexFile
	at    time.Time
}

// cachedIndex returns the index of key if it was read within IndexTTL.
func (f *Fetcher) cachedIndex(key string) (*repo.IndexFile, bool) {
	c, ok := f.indexes.Get(key)
	if !ok || f.now().Sub(c.at) >= IndexTTL {
		return nil, false
	}
	return c.index, true
}

// Option configures a Fetcher.
type Option func(*Fetcher)

// WithHTTPClient makes the Fetcher send its requests through c (its redirect
// policy is replaced by the Fetcher's own).
func WithHTTPClient(c *http.Client) Option {
	return func(f *Fetcher) {
		cc := *c
		f.client = &cc
	}
}

// WithPlainHTTP reaches OCI registries over plain HTTP, for a registry on the
// loopback interface in tests.
func WithPlainHTTP() Option { return func(f *Fetcher) { f.plainHTTP = true } }

// WithLoopback allows repositories on this host's own addresses, which are
// otherwise refused (see New), for a repository served by a test.
func WithLoopback() Option { return func(f *Fetcher) { f.loopback = true } }

// New returns a Fetcher. Unless WithHTTPClient says otherwise, it does not
// connect to loopback or link-local addresses (this host's own services, a cloud
// metadata endpoint), which a Chart.lock of a repository could otherwise make it
// ask for; private networks stay reachable, where in-cluster chart repositories
// live.
func New(opts ...Option) *Fetcher {
	archives, _ := lru.New[archiveKey, []byte](cachedArchives)
	indexes, _ := lru.New[string, cachedIndex](MaxCachedIndexes)
	f := &Fetcher{
		archives:    archives,
		indexes:     indexes,
		now:         time.Now,
		indexParses: make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(f)
	}
	if f.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		dialer := &net.Dialer{Timeout: 10 * time.Second, Control: f.allowAddress}
		t.DialContext = dialer.DialContext
		f.client = &http.Client{Timeout: requestTimeout, Transport: t}
	}
	f.client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("stopped after 5 redirects")
		}
		if !sameHost(req.URL, via[0].URL) {
			return fmt.Errorf("redirected to %s, another host than the repository's", req.URL.Host)
		}
		return nil
	}
	return f
}

var _ render.ChartSource = (*Fetcher)(nil)

// allowAddress refuses connections to loopback and link-local addresses unless
// the Fetcher allows loopback, and to cloud metadata endpoints (see netguard).
func (f *Fetcher) allowAddress(network, address string, c syscall.RawConn) error {
	return netguard.Policy{What: "chart repositories are not read from it", Loopback: f.loopback}.Control(network, address, c)
}

// registryClient is the client for OCI registries, which redirect blob
// downloads to storage on other hosts: those are content-addressed and checked
// against their digest, so any redirect is followed.
func (f *Fetcher) registryClient() *http.Client {
	c := *f.client
	c.CheckRedirect = nil
	return &c
}

// FetchChart returns the archive of dep, checked against its published digest.
func (f *Fetcher) FetchChart(ctx context.Context, dep render.ChartDependency) ([]byte, error) {
	u, err := url.Parse(dep.Repository)
	if err != nil {
		return nil, fmt.Errorf("repository %q is not a URL: %w", dep.Repository, err)
	}
	switch u.Scheme {
	case "https", "http":
		return f.fetchFromIndex(ctx, u, dep)
	case "oci":
		return f.fetchFromRegistry(ctx, u, dep)
	}
	return nil, fmt.Errorf("repository %q is neither an http(s) chart repository nor an oci:// registry", dep.Repository)
}

// fetchFromIndex finds dep in the repository's index and downloads its archive.
func (f *Fetcher) fetchFromIndex(ctx context.Context, base *url.URL, dep render.ChartDependency) ([]byte, error) {
	idx, err := f.index(ctx, base)
	if err != nil {
		return nil, err
	}
	entry := findVersion(idx.Entries[dep.Name], dep.Version)
	if entry == nil {
		return nil, fmt.Errorf("the repository's index lists no version %s of %s", dep.Version, dep.Name)
	}
	if entry.Digest == "" {
		return nil, fmt.Errorf("the repository's index gives no digest for %s %s, so its archive cannot be checked", dep.Name, dep.Version)
	}
	digest := strings.ToLower(strings.TrimPrefix(entry.Digest, "sha256:"))
	key := archiveKey{repository: dep.Repository, name: dep.Name, version: dep.Version, digest: digest}
	if data, ok := f.archives.Get(key); ok {
		return data, nil
	}
	if len(entry.URLs) == 0 {
		return nil, fmt.Errorf("the repository's index gives no URL for %s %s", dep.Name, dep.Version)
	}
	archiveURL, err := resolveArchiveURL(base, entry.URLs[0])
	if err != nil {
		return nil, err
	}
	data, err := f.get(ctx, archiveURL, MaxArchiveBytes, "the archive of "+dep.Name+" "+dep.Version)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != digest {
		return nil, fmt.Errorf("the archive %s has digest sha256:%s, the repository's index says sha256:%s", archiveURL, got, digest)
	}
	f.archives.Add(key, data)
	return data, nil
}

// findVersion finds version among a chart's entries (as validIndex left them)
// as Helm does for "helm pull --version", by which Argo CD fetches an
// Application's chart (repo.IndexFile.Get): in the index sorted newest first,
// the first entry listed as written, else the first whose version matches
// (render.ChartVersionMatch).
func findVersion(entries repo.ChartVersions, version string) *repo.ChartVersion {
	if v := firstNewest(entries, func(v string) bool { return v == version }); v != nil {
		return v
	}
	return firstNewest(entries, render.ChartVersionMatch(version))
}

// firstNewest is the first of entries whose version matches in the order
// Helm sorts them. Of several (1.2.3+build.1 and 1.2.3+build.2, or 1.2.3
// published twice), which comes first is where Helm's sort of the whole list,
// which does not keep the order of equal ones, leaves them.
func firstNewest(entries repo.ChartVersions, matches func(version string) bool) *repo.ChartVersion {
	var found *repo.ChartVersion
	for _, v := range entries {
		if matches(v.Version) {
			if found != nil {
				sorted := newestFirst(entries)
				return sorted[slices.IndexFunc(sorted, func(v *repo.ChartVersion) bool { return matches(v.Version) })]
			}
			found = v
		}
	}
	return found
}

// newestFirst is a copy of entries in the order Helm sorts them when it loads
// an index (repo.IndexFile.SortEntries), each version parsed once rather than
// at every comparison: the same comparisons make the same order.
func newestFirst(entries repo.ChartVersions) repo.ChartVersions {
	s := byVersion{entries: slices.Clone(entries), versions: make([]*semver.Version, len(entries))}
	for i, v := range s.entries {
		s.versions[i], _ = semver.NewVersion(v.Version) // validIndex kept only versions that parse
	}
	sort.Sort(sort.Reverse(s))
	return s.entries
}

type byVersion struct {
	entries  repo.ChartVersions
	versions []*semver.Version
}

func (s byVersion) Len() int           { return len(s.entries) }
func (s byVersion) Less(a, b int) bool { return s.versions[a].LessThan(s.versions[b]) }
func (s byVersion) Swap(a, b int) {
	s.entries[a], s.entries[b] = s.entries[b], s.entries[a]
	s.versions[a], s.versions[b] = s.versions[b], s.versions[a]
}

// validIndex drops the entries Helm skips when it loads an index (no entry,
// invalid metadata, a version that does not parse), as "helm pull" loads it.
func validIndex(idx *repo.IndexFile) {
	for name, versions := range idx.Entries {
		valid := versions[:0]
		for _, v := range versions {
			if v == nil {
				continue
			}
			if v.Metadata == nil {
				v.Metadata = &chart.Metadata{}
			}
			if v.APIVersion == "" {
				v.APIVersion = chart.APIVersionV1
			}
			if err := v.Validate(); err != nil && !skippableValidationError(err) {
				continue
			}
			valid = append(valid, v)
		}
		idx.Entries[name] = valid
	}
}

// skippableValidationError is the one invalid entry Helm still loads: a
// dependency listed twice, which a JFrog repository's index shows when it
// strips the dependencies' aliases.
func skippableValidationError(err error) bool {
	var verr chart.ValidationError
	return errors.As(err, &verr) && strings.HasPrefix(verr.Error(), "validation: more than one dependency with name or alias")
}

// index reads the repository's index.yaml, or reuses one read within IndexTTL.
// Fetches from one repository at once share one read; one that stops waiting
// (its context ended) leaves the read to the others.
func (f *Fetcher) index(ctx context.Context, base *url.URL) (*repo.IndexFile, error) {
	key := base.String()
	if idx, ok := f.cachedIndex(key); ok {
		return idx, nil
	}
	read := f.indexReads.DoChan(key, func() (_ any, err error) {
		// singleflight panics again, unrecoverably, in a goroutine of its own:
		// a fault of the read must fail its fetches, not end the process.
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("read the repository's index: panic: %v", p)
			}
		}()
		if idx, ok := f.cachedIndex(key); ok {
			return idx, nil
		}
		// Not the first caller's context: its end must not fail the others'
		// fetches. The client's timeout bounds the read.
		idx, err := f.readIndex(context.WithoutCancel(ctx), base)
		if err != nil {
			return nil, err
		}
		f.indexes.Add(key, cachedIndex{index: idx, at: f.now()})
		return idx, nil
	})
	select {
	case r := <-read:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*repo.IndexFile), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("read the repository's index: %w", context.Cause(ctx))
	}
}

// readIndex reads and parses the repository's index.yaml, keeping of it only
// what a fetch reads.
func (f *Fetcher) readIndex(ctx context.Context, base *url.URL) (*repo.IndexFile, error) {
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/index.yaml"
	data, err := f.get(ctx, &u, MaxIndexBytes, "the repository's index")
	if err != nil {
		return nil, err
	}
	f.indexParses <- struct{}{}
	defer func() { <-f.indexParses }()
	var idx repo.IndexFile
	if err := unmarshalIndex(data, &idx); err != nil {
		return nil, fmt.Errorf("the repository's index %s does not parse: %w", u.Redacted(), err)
	}
	if idx.APIVersion == "" {
		return nil, fmt.Errorf("%s is not a chart repository index (no apiVersion)", u.Redacted())
	}
	validIndex(&idx)
	return leanIndex(&idx), nil
}

// unmarshalIndex decodes an index as Helm does when it loads one: JSON as Go
// decodes it, YAML strictly. Helm refuses a YAML index with a field it does not
// know, or a key given twice, whole: Argo CD renders no chart of it.
func unmarshalIndex(data []byte, idx *repo.IndexFile) error {
	if json.Valid(data) {
		return json.Unmarshal(data, idx)
	}
	return yaml.UnmarshalStrict(data, idx)
}

// leanIndex is idx with only the names, versions, digests and URLs of its
// charts: descriptions, maintainers and the like are most of an index's size.
func leanIndex(idx *repo.IndexFile) *repo.IndexFile {
	out := &repo.IndexFile{APIVersion: idx.APIVersion, Entries: make(map[string]repo.ChartVersions, len(idx.Entries))}
	for name, versions := range idx.Entries {
		lean := make(repo.ChartVersions, 0, len(versions))
		for _, v := range versions {
			if v == nil || v.Metadata == nil {
				continue
			}
			lean = append(lean, &repo.ChartVersion{
				Metadata: &chart.Metadata{Name: v.Name, Version: v.Version, APIVersion: v.APIVersion},
				URLs:     v.URLs,
				Digest:   v.Digest,
			})
		}
		out.Entries[name] = lean
	}
	return out
}

// resolveArchiveURL resolves an index's archive URL against the repository's, as
// Helm does, refusing one on another host.
func resolveArchiveURL(base *url.URL, ref string) (*url.URL, error) {
	b := *base
	if !strings.HasSuffix(b.Path, "/") {
		b.Path += "/"
	}
	u, err := b.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("the archive URL %q of the index: %w", ref, err)
	}
	if !sameHost(u, base) {
		return nil, fmt.Errorf("the index serves the archive from %s, another host than the repository's (%s): only the repository the Chart.lock names is read", u.Host, base.Host)
	}
	return u, nil
}

func sameHost(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// get reads u, at most limit bytes.
func (f *Fetcher) get(ctx context.Context, u *url.URL, limit int64, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the repository is unreachable: read %s: %w", what, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("read %s: the repository answers %s: it needs credentials, which render does not send", what, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("read %s: the repository answers %s", what, resp.Status)
	case resp.ContentLength > limit:
		return nil, fmt.Errorf("%s is %d bytes, at most %d: %w", what, resp.ContentLength, limit, render.ErrChartTooLarge)
	}
	return readLimited(resp.Body, limit, what)
}

// readLimited reads r to its end, refusing more than limit bytes.
func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is more than %d bytes: %w", what, limit, render.ErrChartTooLarge)
	}
	return data, nil
}
