package cache_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render"
)

func tarball(t *testing.T, entries []tar.Header, contents map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		body := contents[h.Name]
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractTarballConfinesAndLimits(t *testing.T) {
	reg := func(name string) tar.Header { return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
	link := func(name, target string) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}
	}
	limits := cache.ArchiveLimits{MaxFileBytes: 10, MaxTotalBytes: 15, MaxFiles: 5}
	tests := map[string]struct {
		entries  []tar.Header
		contents map[string]string
		wantErr  string
		exist    []string
		absent   []string
		sizes    map[string]int64 // of files written
	}{
		"plain tree": {
			entries:  []tar.Header{{Name: "top/", Typeflag: tar.TypeDir}, reg("top/a/b.yaml")},
			contents: map[string]string{"top/a/b.yaml": "x: 1\n"},
			exist:    []string{"a/b.yaml"},
		},
		"dot-dot path": {
			entries: []tar.Header{reg("top/../../evil")}, wantErr: "leaves the repository tree",
		},
		"absolute symlink skipped": {
			entries: []tar.Header{link("top/etc", "/etc")}, absent: []string{"etc"},
		},
		"escaping symlink skipped": {
			entries: []tar.Header{link("top/a/up", "../../..")}, absent: []string{"a/up"},
		},
		"absolute path": {
			entries:  []tar.Header{reg("/top/etc/passwd")},
			contents: map[string]string{"/top/etc/passwd": "x\n"},
			wantErr:  "leaves the repository tree",
		},
		"dot-dot inside a path": {
			entries: []tar.Header{reg("top/a/../../../evil")}, wantErr: "leaves the repository tree",
		},
		"symlink to the tree itself skipped": {
			entries: []tar.Header{link("top/a/self", "..")}, absent: []string{"a/self"},
		},
		"symlink climbing out through another symlink skipped": {
			// Each link stays inside when read from its own folder, but p/q/y is
			// one folder deep on disk, so the kernel climbs out of the tree
			// through it (either order of the two links).
			entries: []tar.Header{{Name: "top/t/", Typeflag: tar.TypeDir}, link("top/p/q/x", "y/../../../etc/passwd"), link("top/p/q/y", "../../t")},
			exist:   []string{"p/q/y"}, absent: []string{"p/q/x"},
		},
		"symlink climbing out through a later symlink skipped": {
			entries: []tar.Header{{Name: "top/t/", Typeflag: tar.TypeDir}, link("top/p/q/y", "../../t"), link("top/p/q/x", "y/../../../etc/passwd")},
			exist:   []string{"p/q/y"}, absent: []string{"p/q/x"},
		},
		"cycle of symlinks skipped": {
			entries: []tar.Header{link("top/a", "b"), link("top/b", "a"), reg("top/c")},
			absent:  []string{"a", "b"}, exist: []string{"c"},
		},
		"symlink through an inner symlink kept": {
			entries:  []tar.Header{{Name: "top/t/", Typeflag: tar.TypeDir}, reg("top/t/a.yaml"), link("top/p/q/y", "../../t"), link("top/p/q/x", "y/../t/a.yaml")},
			contents: map[string]string{"top/t/a.yaml": "x\n"},
			exist:    []string{"p/q/y", "p/q/x"},
		},
		"entry beyond a symlink refused": {
			// up -> a is inside the tree, but a link written through it would be
			// checked from the wrong folder and could point outside.
			entries: []tar.Header{{Name: "top/a/b/", Typeflag: tar.TypeDir}, link("top/a/b/up", ".."), link("top/a/b/up/l", "../../x")},
			wantErr: "beyond the symbolic link",
		},
		"file written through a symlink refused": {
			entries:  []tar.Header{{Name: "top/real/", Typeflag: tar.TypeDir}, link("top/alias", "real"), reg("top/alias/f.yaml")},
			contents: map[string]string{"top/alias/f.yaml": "x\n"},
			wantErr:  "beyond the symbolic link",
		},
		"devices, fifos and hard links not created": {
			entries: []tar.Header{
				{Name: "top/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
				{Name: "top/disk", Typeflag: tar.TypeBlock, Devmajor: 8},
				{Name: "top/pipe", Typeflag: tar.TypeFifo},
				{Name: "top/passwd", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"},
			},
			absent: []string{"null", "disk", "pipe", "passwd"},
		},
		"inner symlink kept": {
			entries:  []tar.Header{reg("top/a.yaml"), link("top/b.yaml", "a.yaml")},
			contents: map[string]string{"top/a.yaml": "x\n"},
			exist:    []string{"b.yaml"},
		},
		"file over the per-file cap kept cut past it": {
			// A reader bounded by the cap still sees a file over it; the
			// repository is not refused for it.
			entries: []tar.Header{reg("top/big"), reg("top/small")}, contents: map[string]string{"top/big": strings.Repeat("x", 1000), "top/small": "y"},
			sizes: map[string]int64{"big": 11, "small": 1},
		},
		"total over the cap": {
			entries:  []tar.Header{reg("top/a"), reg("top/b")},
			contents: map[string]string{"top/a": strings.Repeat("x", 9), "top/b": strings.Repeat("x", 9)},
			wantErr:  "bytes in all",
		},
		"headers of skipped entries over the cap": {
			// Nothing is written, but every header is unpacked: one blob can be
			// the target of every link of an archive.
			entries: []tar.Header{link("top/a", "/"+strings.Repeat("x", 20_000)), link("top/b", "/"+strings.Repeat("x", 20_000)), link("top/c", "/"+strings.Repeat("x", 20_000))},
			wantErr: "more than 49167 bytes of headers and files",
		},
		"too many entries": {
			entries: []tar.Header{reg("top/1"), reg("top/2"), reg("top/3"), reg("top/4"), reg("top/5"), reg("top/6")},
			wantErr: "more than 5 entries",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := cache.ExtractTarball(bytes.NewReader(tarball(t, tc.entries, tc.contents)), dir, limits)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.exist {
				if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
					t.Errorf("%s missing: %v", p, err)
				}
			}
			for p, want := range tc.sizes {
				if info, err := os.Stat(filepath.Join(dir, p)); err != nil || info.Size() != want {
					t.Errorf("%s: %v, want %d bytes", p, err, want)
				}
			}
			for _, p := range tc.absent {
				if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
					t.Errorf("%s was created", p)
				}
			}
		})
	}
}

func TestArchiveCacheEvictsLeastRecentlyUsedUnused(t *testing.T) {
	archives, err := cache.NewArchives(t.TempDir(), 10, cache.DefaultArchiveLimits)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fetch := func(body string) cache.Fetcher {
		return func(context.Context) (io.ReadCloser, error) {
			h := []tar.Header{{Name: "top/f", Typeflag: tar.TypeReg, Mode: 0o644}}
			return io.NopCloser(bytes.NewReader(tarball(t, h, map[string]string{"top/f": body}))), nil
		}
	}
	sha := func(i int) string { return fmt.Sprintf("%040d", i) }
	held, err := archives.Get(ctx, "o/r", sha(1), fetch("123456"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := archives.Get(ctx, "o/r", sha(2), fetch("123456"))
	if err != nil {
		t.Fatal(err)
	}
	other.Release()
	// Over the bound: sha(2) is unused and goes; sha(1) is held and stays.
	if _, err := os.Stat(held.Dir); err != nil {
		t.Fatalf("held snapshot evicted: %v", err)
	}
	if _, err := os.Stat(other.Dir); err == nil {
		t.Fatalf("unused snapshot kept over the size bound")
	}
	held.Release()
}

func TestRenderCacheKeepsOutputWithinItsBound(t *testing.T) {
	c, err := cache.NewRenders(t.TempDir(), 10)
	if err != nil {
		t.Fatal(err)
	}
	k1 := cache.RenderKey("o/r", strings.Repeat("a", 40), "apps/web", "Kustomize")
	k2 := cache.RenderKey("o/r", strings.Repeat("b", 40), "apps/web", "Kustomize")
	if k1 == k2 || k1 != cache.RenderKey("o/r", strings.Repeat("a", 40), "apps/web", "Kustomize") {
		t.Fatal("render keys are not a function of repository, commit, path and options")
	}
	if err := c.Store(k1, []byte("123456")); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Load(k1); !ok || string(got) != "123456" {
		t.Fatalf("Load = %q %v", got, ok)
	}
	if err := c.Store(k2, []byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Load(k1); ok {
		t.Fatal("the older entry survived past the size bound")
	}
	if got, ok := c.Load(k2); !ok || string(got) != "abcdef" {
		t.Fatalf("newest entry: %q %v", got, ok)
	}
	if st := c.Stats(); st.Hits != 2 || st.Misses != 1 {
		t.Fatalf("stats %+v, want 2 hits and 1 miss", st)
	}
}

func TestRenderCacheEntriesAppearWhole(t *testing.T) {
	c, err := cache.NewRenders(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	key := cache.RenderKey("o/r", strings.Repeat("a", 40), "apps/web", "Directory")
	small, large := []byte("v1"), bytes.Repeat([]byte("x"), 64<<10)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			out := small
			if i%2 == 1 {
				out = large
			}
			if err := c.Store(key, out); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if got, ok := c.Load(key); ok && !bytes.Equal(got, small) && !bytes.Equal(got, large) {
				t.Errorf("read a partly written entry of %d bytes", len(got))
			}
		}()
	}
	wg.Wait()
}

// TestLargeFileRefusesOnlyTheRenderThatReadsIt: an archive holding a file over
// the per-file cap still extracts; an app that does not read the file plans, one
// that reads it is refused naming the file, as if the whole file were there.
func TestLargeFileRefusesOnlyTheRenderThatReadsIt(t *testing.T) {
	reg := func(name string) tar.Header { return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n"
	big := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: " + strings.Repeat("x", 6<<20) + "\n"
	dir := t.TempDir()
	entries := []tar.Header{reg("top/web/deployment.yaml"), reg("top/big/deployment.yaml"), reg("top/big/big.yaml")}
	contents := map[string]string{"top/web/deployment.yaml": deployment, "top/big/deployment.yaml": deployment, "top/big/big.yaml": big}
	if _, err := cache.ExtractTarball(bytes.NewReader(tarball(t, entries, contents)), dir, cache.DefaultArchiveLimits); err != nil {
		t.Fatal(err)
	}
	plan := func(path string) error {
		_, err := render.Plan(context.Background(), render.Request{RepoDir: dir,
			Apps: []render.Application{{Name: "web", Path: path, SourceType: render.SourceDirectory, Namespace: "web"}}, App: "web",
			Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Change: render.Change{Replicas: &render.Replicas{Count: 3}}})
		return err
	}
	if err := plan("web"); err != nil {
		t.Fatalf("the app that does not read the large file: %v", err)
	}
	var ref *render.Refusal
	if err := plan("big"); !errors.As(err, &ref) || ref.Code != render.CodeFileTooLarge || ref.Reason != "big/big.yaml is over the 5242880 byte limit" {
		t.Fatalf("the app that reads it: %v", err)
	}
}
