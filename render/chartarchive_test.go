package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// tarEntry is an entry of a hand-made archive: a header, and its contents.
type tarEntry struct {
	h    tar.Header
	data string
}

func tarFile(name, data string) tarEntry {
	return tarEntry{h: tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg}, data: data}
}

// tarBytes is the tar archive of entries, ended as tar ends an archive.
func tarBytes(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := e.h
		h.Size = int64(len(e.data))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipped(t testing.TB, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	if _, err := gz.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// tgz is the chart archive of entries.
func tgz(t testing.TB, entries ...tarEntry) string {
	t.Helper()
	return gzipped(t, tarBytes(t, entries...))
}

// chartMeta is the Chart.yaml of chart name at the top of its archive.
func chartMeta(name string) tarEntry {
	return tarFile(name+"/Chart.yaml", "apiVersion: v2\nname: "+name+"\nversion: 0.1.0\n")
}

// nestedArchives is chart l1's archive holding l2's under its charts/, and so
// on down to ln's, which holds innermost besides its Chart.yaml.
func nestedArchives(t *testing.T, n int, innermost ...tarEntry) string {
	t.Helper()
	archive := tgz(t, append([]tarEntry{chartMeta(fmt.Sprintf("l%d", n))}, innermost...)...)
	for i := n - 1; i >= 1; i-- {
		name := fmt.Sprintf("l%d", i)
		archive = tgz(t, chartMeta(name), tarFile(fmt.Sprintf("%s/charts/l%d-0.1.0.tgz", name, i+1), archive))
	}
	return archive
}

// manyFiles is chart name's archive of n empty files.
func manyFiles(t *testing.T, name string, n int) string {
	t.Helper()
	entries := []tarEntry{chartMeta(name)}
	for i := range n {
		entries = append(entries, tarFile(fmt.Sprintf("%s/files/f%04d", name, i), ""))
	}
	return tgz(t, entries...)
}

// A chart archive is expanded, archives nested in it included as Helm's loader
// loads them, within the bounds of a render's chart archives; what "helm
// package" never writes, and Helm's loader would take in some way of its own,
// is refused naming the entry.
func TestCheckChartArchiveRefusesHostileArchives(t *testing.T) {
	pad := chartArchive(t, "pad", MaxChartArchiveBytes+1)
	link := func(flag byte, name, target string) tarEntry {
		return tarEntry{h: tar.Header{Name: name, Typeflag: flag, Linkname: target, Mode: 0o644}}
	}
	device := func(flag byte, name string) tarEntry {
		return tarEntry{h: tar.Header{Name: name, Typeflag: flag, Mode: 0o644, Devmajor: 1, Devminor: 3}}
	}
	cases := map[string]struct {
		archive string
		code    string
		reason  string
	}{
		"an archive under charts/ that expands past the bound": {
			archive: tgz(t, chartMeta("outer"), tarFile("outer/charts/pad-0.1.0.tgz", pad)),
			code:    CodeTooLarge, reason: "outer/charts/pad-0.1.0.tgz in c.tgz: the chart archives of the render expand to more than 16777216 bytes",
		},
		"an archive under the charts/ of a subchart directory": {
			archive: tgz(t, chartMeta("outer"), tarFile("outer/charts/sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"), tarFile("outer/charts/sub/charts/pad-0.1.0.tgz", pad)),
			code:    CodeTooLarge, reason: "outer/charts/sub/charts/pad-0.1.0.tgz in c.tgz: the chart archives of the render expand to more than 16777216 bytes",
		},
		"archives under charts/ named with the separator of Windows": {
			// Helm's loader splits a name holding \ at \ alone: this file is
			// charts/pad-0.1.0.tgz of the chart.
			archive: tgz(t, tarFile(`outer/x\Chart.yaml`, "apiVersion: v2\nname: outer\nversion: 0.1.0\n"), tarFile(`outer/x\charts\pad-0.1.0.tgz`, pad)),
			code:    CodeTooLarge, reason: `outer/x\charts\pad-0.1.0.tgz in c.tgz: the chart archives of the render expand to more than`,
		},
		"archives nested six deep": {
			archive: nestedArchives(t, MaxChartArchiveDepth+1),
			code:    CodeTooLarge, reason: "l5/charts/l6-0.1.0.tgz in l4/charts/l5-0.1.0.tgz in l3/charts/l4-0.1.0.tgz in l2/charts/l3-0.1.0.tgz in l1/charts/l2-0.1.0.tgz in c.tgz: chart archives nested more than 5 deep, at most 5",
		},
		"archives under charts/ of more files than a chart may hold": {
			archive: tgz(t, chartMeta("outer"), tarFile("outer/charts/a-0.1.0.tgz", manyFiles(t, "a", MaxChartFiles/2)), tarFile("outer/charts/b-0.1.0.tgz", manyFiles(t, "b", MaxChartFiles/2))),
			code:    CodeTooLarge, reason: "outer/charts/b-0.1.0.tgz in c.tgz: the chart and its archives hold more than 2000 files, at most 2000",
		},
		"a file in a parent directory": {
			archive: tgz(t, chartMeta("outer"), tarFile("outer/../../etc/cron.d/x", "x")),
			code:    CodePathEscape, reason: "c.tgz: outer/../../etc/cron.d/x leaves the chart's directory",
		},
		"an absolute path": {
			// Helm's loader takes it for etc/passwd of a chart directory "".
			archive: tgz(t, chartMeta("outer"), tarFile("/etc/passwd", "x")),
			code:    CodePathEscape, reason: "c.tgz: /etc/passwd is an absolute path",
		},
		"an absolute path inside the chart's directory": {
			archive: tgz(t, chartMeta("outer"), tarFile("outer//etc/passwd", "x")),
			code:    CodePathEscape, reason: "c.tgz: outer//etc/passwd is an absolute path",
		},
		"a Windows drive": {
			archive: tgz(t, chartMeta("outer"), tarFile(`outer\C:\secrets`, "x")),
			code:    CodePathEscape, reason: `c.tgz: outer\C:\secrets is an absolute path`,
		},
		"a file at the top of the archive": {
			archive: tgz(t, tarFile("Chart.yaml", "apiVersion: v2\nname: top\nversion: 0.1.0\n")),
			code:    CodePathEscape, reason: "c.tgz: Chart.yaml is not inside the chart's directory",
		},
		"a symbolic link": {
			// Helm's loader takes it for an empty file.
			archive: tgz(t, chartMeta("outer"), link(tar.TypeSymlink, "outer/templates/secret.yaml", "/etc/passwd")),
			code:    CodeRenderFailed, reason: "c.tgz: outer/templates/secret.yaml is a symbolic link; a chart archive holds only files and directories",
		},
		"a hard link": {
			archive: tgz(t, chartMeta("outer"), link(tar.TypeLink, "outer/values.yaml", "outer/Chart.yaml")),
			code:    CodeRenderFailed, reason: "c.tgz: outer/values.yaml is a hard link",
		},
		"a character device": {
			archive: tgz(t, chartMeta("outer"), device(tar.TypeChar, "outer/files/null")),
			code:    CodeRenderFailed, reason: "c.tgz: outer/files/null is a character device",
		},
		"a block device": {
			archive: tgz(t, chartMeta("outer"), device(tar.TypeBlock, "outer/files/sda")),
			code:    CodeRenderFailed, reason: "c.tgz: outer/files/sda is a block device",
		},
		"a named pipe": {
			archive: tgz(t, chartMeta("outer"), device(tar.TypeFifo, "outer/files/pipe")),
			code:    CodeRenderFailed, reason: "c.tgz: outer/files/pipe is a named pipe",
		},
		"a link in an archive under charts/": {
			archive: tgz(t, chartMeta("outer"), tarFile("outer/charts/in-0.1.0.tgz", tgz(t, chartMeta("in"), link(tar.TypeSymlink, "in/values.yaml", "../../values.yaml")))),
			code:    CodeRenderFailed, reason: "outer/charts/in-0.1.0.tgz in c.tgz: in/values.yaml is a symbolic link",
		},
		"a file twice": {
			// Helm's loader keeps both: which one a render reads is its own choice.
			archive: tgz(t, chartMeta("outer"), tarFile("outer/values.yaml", "replicas: 1\n"), tarFile("outer/values.yaml", "replicas: 9\n")),
			code:    CodeRenderFailed, reason: "c.tgz: outer/values.yaml is in the archive more than once",
		},
		"a file twice, by two names": {
			archive: tgz(t, chartMeta("outer"), tarFile("outer/values.yaml", "replicas: 1\n"), tarFile("outer/./values.yaml", "replicas: 9\n")),
			code:    CodeRenderFailed, reason: "c.tgz: outer/./values.yaml is in the archive more than once",
		},
		"two chart directories": {
			// Helm's loader merges them; a chart pulled from a repository is
			// the directory its name gives.
			archive: tgz(t, chartMeta("outer"), tarFile("other/templates/extra.yaml", "kind: ConfigMap\n")),
			code:    CodeRenderFailed, reason: "c.tgz: other/templates/extra.yaml is outside the chart's directory outer/ of the archive: a chart archive holds one chart",
		},
		"directories alone": {
			archive: tgz(t, tarEntry{h: tar.Header{Name: "outer/", Typeflag: tar.TypeDir, Mode: 0o755}}),
			code:    CodeRenderFailed, reason: "c.tgz: not a chart archive: it holds no files",
		},
		"directories by the ten thousand": {
			// Neither the check nor Helm's loader keeps a directory, but each
			// is a header to decompress: a few megabytes of them compressed
			// are gigabytes to read, twice.
			archive: tgz(t, append(slices.Repeat([]tarEntry{{h: tar.Header{Name: "outer/", Typeflag: tar.TypeDir, Mode: 0o755}}}, MaxChartArchiveBytes/512), chartMeta("outer"))...),
			code:    CodeTooLarge, reason: "c.tgz: the chart archives of the render expand to more than 16777216 bytes",
		},
		"extended headers of a megabyte each": {
			// Helm's loader keeps no extended header record but the name, yet
			// each is up to a megabyte to decompress, and a few kilobytes of
			// archive compress from one: a chart archive's 5 MiB held four
			// gigabytes of them, read twice.
			archive: tgz(t, append(slices.Repeat([]tarEntry{{h: tar.Header{Name: "outer/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX, PAXRecords: map[string]string{"comment": strings.Repeat("x", 1<<20-64)}}}}, MaxChartArchiveBytes>>20), chartMeta("outer"))...),
			code:    CodeTooLarge, reason: "c.tgz: the chart archives of the render expand to more than 16777216 bytes",
		},
		"gzip that is not tar": {
			archive: gzipped(t, []byte("apiVersion: v2\nname: outer\nversion: 0.1.0\n"+strings.Repeat("\n", 1024))),
			code:    CodeRenderFailed, reason: "c.tgz: not a chart archive: archive/tar: invalid tar header",
		},
		"not gzip": {
			archive: string(tarBytes(t, chartMeta("outer"))),
			code:    CodeRenderFailed, reason: "c.tgz: not a chart archive: gzip: invalid header",
		},
		"a tar cut short, then bytes that are not gzip": {
			archive: gzipped(t, tarBytes(t, chartMeta("outer"))[:512]) + "bytes that are not a gzip stream",
			code:    CodeRenderFailed, reason: "c.tgz: not a chart archive: gzip: invalid header",
		},
		"a second gzip stream that expands past the bound": {
			// Helm's loader reads concatenated streams as one, and so does the check.
			archive: gzipped(t, tarBytes(t, chartMeta("outer"))[:1024]) + gzipped(t, tarBytes(t, tarFile("outer/templates/pad.yaml", strings.Repeat(" ", MaxChartArchiveBytes)))),
			code:    CodeTooLarge, reason: "c.tgz: the chart archives of the render expand to more than 16777216 bytes",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			budget := newArchiveBudget()
			_, err := checkChartArchive("c.tgz", []byte(tc.archive), &budget)
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Code != tc.code || !strings.Contains(ref.Reason, tc.reason) {
				t.Fatalf("got %v, want refused (%s) with %q", err, tc.code, tc.reason)
			}
		})
	}
}

// What Helm's loader takes as a chart is expanded and counted, every archive
// it loads at every depth included, and no more: files named .tgz that it
// does not load as charts are files.
func TestCheckChartArchiveCountsEveryArchiveHelmLoads(t *testing.T) {
	inner := tgz(t, chartMeta("in"), tarFile("in/templates/a.yaml", "kind: ConfigMap\n"))
	cases := map[string]struct{ archive string }{
		"archives nested five deep": {
			archive: nestedArchives(t, MaxChartArchiveDepth),
		},
		"an archive under charts/": {
			archive: tgz(t, chartMeta("outer"), tarFile("outer/charts/in-0.1.0.tgz", inner)),
		},
		"files named .tgz that are no subchart's archive": {
			archive: tgz(t, chartMeta("outer"),
				tarFile("outer/files/blob.tgz", "not gzip"),
				tarFile("outer/charts/_skipped.tgz", "not gzip"),
				tarFile("outer/charts/in-0.1.0.tgz.prov", "a signature"),
				tarFile("outer/charts/sub/files/blob.tgz", "not gzip")),
		},
		"bytes after the end of the archive": {
			// Helm's loader stops at the tar's end, as the check does.
			archive: tgz(t, chartMeta("outer")) + "trailing bytes",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			budget := newArchiveBudget()
			if _, err := checkChartArchive("c.tgz", []byte(tc.archive), &budget); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Both levels count, each all its tar stream decompresses to: the inner
	// archive's bytes as a file of the outer one, and what it holds.
	outerTar := tarBytes(t, chartMeta("outer"), tarFile("outer/charts/in-0.1.0.tgz", inner))
	archive := gzipped(t, outerTar)
	budget := newArchiveBudget()
	dir, err := checkChartArchive("c.tgz", []byte(archive), &budget)
	if err != nil || dir != "outer" {
		t.Fatalf("got %q, %v, want the chart's directory outer", dir, err)
	}
	want := len(outerTar) + len(tarBytes(t, chartMeta("in"), tarFile("in/templates/a.yaml", "kind: ConfigMap\n")))
	if used := MaxChartArchiveBytes - budget.bytes; used != int64(want) {
		t.Errorf("counted %d bytes, want %d", used, want)
	}
	if used := MaxChartFiles - budget.files; used != 4 {
		t.Errorf("counted %d files, want 4", used)
	}
}

// FuzzCheckChartArchiveCountsWhatHelmLoads checks the check against Helm's
// loader: of an archive whose entries the fuzzer names (a file named .tgz is a
// small archive of a chart that expands to far more than its own bytes), all
// the loader holds, every archive it loads under another included, is no more
// than what the check counted; what the check refuses, it refuses naming the
// archive.
func FuzzCheckChartArchiveCountsWhatHelmLoads(f *testing.F) {
	for _, seed := range []string{
		"outer/Chart.yaml\nouter/charts/in-0.1.0.tgz",
		"outer/Chart.yaml\nouter/charts/sub/Chart.yaml\nouter/charts/sub/charts/in-0.1.0.tgz",
		"outer\\Chart.yaml\nouter\\charts\\in-0.1.0.tgz",
		"outer/x\\Chart.yaml\nouter/x\\charts\\in.tgz",
		"outer/Chart.yaml\nouter/charts/_in.tgz\nouter/charts/.in.tgz\nouter/charts/in.tgz.prov",
		"outer/Chart.yaml\nouter/./charts//in.tgz",
		"outer/Chart.yaml\nouter/charts/in.tgz/Chart.yaml",
		"./Chart.yaml\n./charts/in.tgz",
	} {
		f.Add(seed)
	}
	inner := tgz(f, chartMeta("in"), tarFile("in/templates/pad.yaml", "# "+strings.Repeat(" ", 64<<10)))
	f.Fuzz(func(t *testing.T, names string) {
		var entries []tarEntry
		for _, name := range strings.SplitN(names, "\n", 64) {
			switch {
			case strings.HasSuffix(name, ".tgz"):
				entries = append(entries, tarFile(name, inner))
			case strings.HasSuffix(name, "Chart.yaml"):
				entries = append(entries, tarFile(name, "apiVersion: v2\nname: c\nversion: 0.1.0\n"))
			default:
				entries = append(entries, tarFile(name, "x"))
			}
		}
		var raw bytes.Buffer
		tw := tar.NewWriter(&raw)
		for _, e := range entries {
			h := e.h
			h.Size = int64(len(e.data))
			if tw.WriteHeader(&h) != nil {
				return // no tar can name it so
			}
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		archive := []byte(gzipped(t, raw.Bytes()))
		budget := newArchiveBudget()
		if _, err := checkChartArchive("c.tgz", archive, &budget); err != nil {
			var ref *Refusal
			if !errors.As(err, &ref) || !strings.Contains(ref.Reason, "c.tgz") {
				t.Fatalf("refused without naming the archive: %v", err)
			}
			return
		}
		ch, err := loader.LoadArchive(bytes.NewReader(archive))
		if err != nil {
			return
		}
		// A subchart directory's files are its parent's: count each once.
		seen := map[*byte]bool{}
		held := 0
		var walk func(c *chart.Chart)
		walk = func(c *chart.Chart) {
			for _, file := range c.Raw {
				if len(file.Data) > 0 && !seen[&file.Data[0]] {
					seen[&file.Data[0]] = true
					held += len(file.Data)
				}
			}
			for _, d := range c.Dependencies() {
				walk(d)
			}
		}
		walk(ch)
		if counted := MaxChartArchiveBytes - budget.bytes; int64(held) > counted {
			t.Fatalf("Helm's loader holds %d bytes of the archive's files, the check counted %d", held, counted)
		}
	})
}
