package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
)

// MaxChartArchiveDepth is how deeply chart archives may nest: an archive of a
// chart's charts/ (vendored, fetched, or the chart an app deploys) is the first
// level, an archive under its own charts/ the second. Helm's loader expands
// every level in memory, each under a bound of its own, so only a bound on
// them all together (MaxChartArchiveBytes, MaxChartFiles) and on their depth
// keeps a small archive from expanding without end; an umbrella chart's
// subcharts and theirs are three levels.
const MaxChartArchiveDepth = 5

// archiveBudget is what is left of the bounds of a chart, its subcharts
// included: the files it may still hold and the bytes its archives may still
// expand to, at every depth (each entry's contents, and all the tar reader
// decompresses to find it: see headerMeter).
type archiveBudget struct {
	bytes int64
	files int
}

func newArchiveBudget() archiveBudget {
	return archiveBudget{bytes: MaxChartArchiveBytes, files: MaxChartFiles}
}

// checkChartArchive expands a chart archive without keeping it, to bound what
// Helm's loader will expand: the archive's own bytes passed the reader's
// bounds, what they decompress to has not. It refuses, naming the entry, what
// a chart archive made by "helm package" never holds and Helm's loader would
// take in some way of its own (links and devices as empty files, an entry twice,
// entries outside the chart's directory), and counts every file and byte
// against budget, the archives of its charts/ at every depth included. It
// returns the chart's directory in the archive (the first element of every
// entry's name, which Helm's loader drops).
func checkChartArchive(file string, data []byte, budget *archiveBudget) (dir string, err error) {
	return expandChartArchive(file, bytes.NewReader(data), 1, budget)
}

func expandChartArchive(file string, r io.Reader, depth int, budget *archiveBudget) (string, error) {
	if depth > MaxChartArchiveDepth {
		return "", refuse(CodeTooLarge, "%s: chart archives nested more than %d deep, at most %d", file, MaxChartArchiveDepth, MaxChartArchiveDepth)
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return "", refuse(CodeRenderFailed, "%s: not a chart archive: %v", file, err)
	}
	meter := &headerMeter{r: gz, budget: budget}
	tr := tar.NewReader(meter)
	var top string
	seen := map[string]bool{}
	for {
		meter.on = true
		h, err := tr.Next()
		meter.on = false
		if budget.bytes < 0 {
			return "", archiveTooLarge(file)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", refuse(CodeRenderFailed, "%s: not a chart archive: %v", file, err)
		}
		switch {
		case h.FileInfo().IsDir() || h.Typeflag == tar.TypeXGlobalHeader:
			// Helm's loader skips both.
			continue
		case h.Typeflag == tar.TypeReg:
		default:
			return "", refuse(CodeRenderFailed, "%s: %s is %s; a chart archive holds only files and directories", file, h.Name, tarEntryKind(h.Typeflag))
		}
		dir, name, err := chartArchiveEntry(h.Name)
		if err != nil {
			return "", refuse(CodePathEscape, "%s: %s %v", file, h.Name, err)
		}
		if top == "" {
			top = dir
		} else if dir != top {
			return "", refuse(CodeRenderFailed, "%s: %s is outside the chart's directory %s/ of the archive: a chart archive holds one chart", file, h.Name, top)
		}
		if seen[name] {
			return "", refuse(CodeRenderFailed, "%s: %s is in the archive more than once", file, h.Name)
		}
		seen[name] = true
		budget.files--
		if budget.files < 0 {
			return "", refuse(CodeTooLarge, "%s: the chart and its archives hold more than %d files, at most %d", file, MaxChartFiles, MaxChartFiles)
		}
		// The tar reader yields exactly Size bytes of a file, or fails: the
		// bound holds before they are read.
		budget.bytes -= h.Size
		if budget.bytes < 0 {
			return "", archiveTooLarge(file)
		}
		if subchartArchive(name) {
			if _, err := expandChartArchive(h.Name+" in "+file, tr, depth+1, budget); err != nil {
				return "", err
			}
		}
		// What is left of the file is read here, counted above, and not by
		// the meter, as the tar reader would read it to find the next entry.
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return "", refuse(CodeRenderFailed, "%s: not a chart archive: %v", file, err)
		}
	}
	if len(seen) == 0 {
		return "", refuse(CodeRenderFailed, "%s: not a chart archive: it holds no files", file)
	}
	return top, nil
}

// headerMeter counts against budget what the tar reader decompresses while
// on: all it reads to find an entry, which neither the check nor Helm's
// loader keeps of it but the name. That is a header of 512 bytes, and extended
// headers and long names of up to a megabyte each, as many as an entry has
// before it; a directory is one header alone. Compressed, a few kilobytes
// hold a megabyte of them, and a chart archive's few megabytes gigabytes.
// Past the budget it fails the read.
type headerMeter struct {
	r      io.Reader
	budget *archiveBudget
	on     bool
}

var errArchiveBudget = errors.New("the chart archives of the render expand past their bound")

func (m *headerMeter) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if m.on {
		if m.budget.bytes -= int64(n); m.budget.bytes < 0 {
			return n, errArchiveBudget
		}
	}
	return n, err
}

func archiveTooLarge(file string) error {
	return refuse(CodeTooLarge, "%s: the chart archives of the render expand to more than %d bytes, at most %d", file, MaxChartArchiveBytes, MaxChartArchiveBytes)
}

// windowsDrive is how Helm's loader recognises a path naming a Windows drive.
var windowsDrive = regexp.MustCompile(`^[a-zA-Z]:/`)

// chartArchiveEntry splits an entry's name as Helm's loader does into the
// chart's directory (its first element, which the loader drops) and the file's
// name in the chart, cleaned. An archive made on Windows may separate with \,
// and then, as the loader reads it, only \ separates. It refuses a name that
// is absolute or climbs out of a directory anywhere, and one at the archive's
// top: Helm's loader refuses most of them and reads some elsewhere than they
// say.
func chartArchiveEntry(raw string) (dir, name string, err error) {
	sep := "/"
	if strings.ContainsRune(raw, '\\') {
		sep = "\\"
	}
	parts := strings.Split(raw, sep)
	dir, rest := parts[0], strings.ReplaceAll(strings.Join(parts[1:], sep), sep, "/")
	if dir == "" || path.IsAbs(rest) || windowsDrive.MatchString(raw) || windowsDrive.MatchString(rest) {
		return "", "", errors.New("is an absolute path")
	}
	for _, elem := range strings.FieldsFunc(raw, func(r rune) bool { return r == '/' || r == '\\' }) {
		if elem == ".." {
			return "", "", errors.New("leaves the chart's directory")
		}
	}
	name = path.Clean(rest)
	if rest == "" || name == "." || windowsDrive.MatchString(name) {
		return "", "", errors.New("is not inside the chart's directory")
	}
	return dir, name, nil
}

// subchartArchive reports whether Helm's loader loads the file name of a chart
// as a subchart's archive: charts/<name>.tgz of the chart, or of a subchart
// directory under its charts/, at any depth, unless <name> starts with _ or .
// (which the loader skips). A file charts/<name>.tgz/... the loader refuses.
func subchartArchive(name string) bool {
	for {
		rest, ok := strings.CutPrefix(name, "charts/")
		if !ok || path.Ext(rest) == ".prov" {
			return false
		}
		sub, inside, nested := strings.Cut(rest, "/")
		if strings.IndexAny(sub, "_.") == 0 || path.Ext(sub) == ".tgz" && nested {
			return false
		}
		if !nested {
			return path.Ext(sub) == ".tgz"
		}
		name = inside
	}
}

// tarEntryKind names what a tar entry that is no file or directory is.
func tarEntryKind(flag byte) string {
	switch flag {
	case tar.TypeSymlink:
		return "a symbolic link"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeChar:
		return "a character device"
	case tar.TypeBlock:
		return "a block device"
	case tar.TypeFifo:
		return "a named pipe"
	}
	return fmt.Sprintf("an entry of tar type %q", flag)
}
