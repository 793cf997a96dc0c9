package github

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// MaxComparedFiles is the most files GitHub lists in a comparison of two commits;
// a comparison that lists this many may have more.
const MaxComparedFiles = 300

// Comparison is what changed from a base commit to a head, as GitHub's compare
// endpoint (base...head, from their merge base) reports it.
type Comparison struct {
	// MergeBase is the commit the head's changes are counted from.
	MergeBase string
	Files     []ChangedFile
	// Complete is false when GitHub may have listed only some of the files.
	Complete bool
}

// ChangedFile is one file a comparison changes.
type ChangedFile struct {
	Path string
	// PreviousPath is the file's name before a rename.
	PreviousPath string
	// Status is GitHub's: added, removed, modified, renamed, copied, changed.
	Status string
	// BlobSHA is the head's blob of the file (none for a removed file).
	BlobSHA string
	// Lines are the ranges of lines of the head's file that the change adds or
	// replaces, first to last (each [first, last], counted from 1); empty when
	// GitHub shows no patch (a binary or very large file) or only lines went.
	Lines [][2]int
}

// Compare lists the files changed from base to head (three dots: the head's own
// changes since the merge base).
func Compare(ctx context.Context, c *gh.Client, owner, repo, base, head string) (Comparison, error) {
	cmp, _, err := c.Repositories.CompareCommits(ctx, owner, repo, base, head, &gh.ListOptions{PerPage: 1})
	if err != nil {
		return Comparison{}, fmt.Errorf("compare %s...%s: %w", base, head, err)
	}
	out := Comparison{MergeBase: cmp.GetMergeBaseCommit().GetSHA(), Complete: len(cmp.Files) < MaxComparedFiles}
	for _, f := range cmp.Files {
		out.Files = append(out.Files, ChangedFile{Path: f.GetFilename(), PreviousPath: f.GetPreviousFilename(),
			Status: f.GetStatus(), BlobSHA: f.GetSHA(), Lines: AddedLines(f.GetPatch())})
	}
	return out, nil
}

// AddedLines returns the ranges of new-side lines a unified diff's hunks add, as
// [first, last] pairs counted from 1.
func AddedLines(patch string) [][2]int {
	var out [][2]int
	line, inHunk := 0, false
	open := func(n int) {
		if k := len(out); k > 0 && out[k-1][1] == n-1 {
			out[k-1][1] = n
			return
		}
		out = append(out, [2]int{n, n})
	}
	for _, l := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(l, "@@"):
			start, ok := hunkNewStart(l)
			line, inHunk = start, ok
		case !inHunk:
		case strings.HasPrefix(l, "+"):
			open(line)
			line++
		case strings.HasPrefix(l, "-"), strings.HasPrefix(l, `\`):
		default:
			line++
		}
	}
	return out
}

// hunkNewStart reads the new side's first line from a hunk header
// "@@ -a,b +c,d @@".
func hunkNewStart(header string) (int, bool) {
	_, rest, ok := strings.Cut(header, " +")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, " ")
	num, _, _ = strings.Cut(num, ",")
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Compare is the package function Compare through the installation's client.
func (g Repos) Compare(ctx context.Context, inst int64, repo, base, head string) (Comparison, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return Comparison{}, err
	}
	return calledWith(Compare(ctx, c, owner, name, base, head))
}

// ErrBlobTooLarge is returned by Blob for a blob over the size asked for.
var ErrBlobTooLarge = errors.New("blob over the limit")

// Blob reads one blob's content, refusing one larger than maxBytes.
func Blob(ctx context.Context, c *gh.Client, owner, repo, sha string, maxBytes int) ([]byte, error) {
	b, _, err := c.Git.GetBlob(ctx, owner, repo, sha)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", sha, err)
	}
	if b.GetSize() > maxBytes {
		return nil, fmt.Errorf("blob %s has %d bytes: %w", sha, b.GetSize(), ErrBlobTooLarge)
	}
	if b.GetEncoding() != "base64" {
		return []byte(b.GetContent()), nil
	}
	data, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(b.GetContent(), "\n", ""))
	if err != nil {
		return nil, fmt.Errorf("decode blob %s: %w", sha, err)
	}
	return data, nil
}

// Blob is the package function Blob through the installation's client.
func (g Repos) Blob(ctx context.Context, inst int64, repo, sha string, maxBytes int) ([]byte, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return nil, err
	}
	return calledWith(Blob(ctx, c, owner, name, sha, maxBytes))
}

// Git modes of tree entries that FileModes reports.
const (
	ModeFile       = "100644"
	ModeExecutable = "100755"
	ModeSymlink    = "120000"
	ModeSubmodule  = "160000"
)

// FileModes returns the git mode of each of paths at commit (ModeFile, ModeSymlink,
// ...): a comparison does not say a changed file is a symbolic link, whose blob
// is the link's target. It reads the commit's trees one folder at a time, each
// folder on the way to a path once; a path the commit does not hold is left out,
// and a folder listing GitHub truncated is an error.
func FileModes(ctx context.Context, c *gh.Client, owner, repo, commit string, paths []string) (map[string]string, error) {
	folders := map[string]map[string]*gh.TreeEntry{}
	list := func(dir, sha string) (map[string]*gh.TreeEntry, error) {
		if entries, ok := folders[dir]; ok {
			return entries, nil
		}
		t, _, err := c.Git.GetTree(ctx, owner, repo, sha, false)
		if err != nil {
			return nil, fmt.Errorf("read tree of %q at %s: %w", dir, commit, err)
		}
		if t.GetTruncated() {
			return nil, fmt.Errorf("read tree of %q at %s: GitHub truncated the listing", dir, commit)
		}
		entries := map[string]*gh.TreeEntry{}
		for _, e := range t.Entries {
			entries[e.GetPath()] = e
		}
		folders[dir] = entries
		return entries, nil
	}
	out := map[string]string{}
	for _, p := range paths {
		entries, err := list("", commit)
		if err != nil {
			return nil, err
		}
		elems := strings.Split(p, "/")
		dir := ""
		for i, el := range elems {
			e, ok := entries[el]
			if !ok {
				break
			}
			if i == len(elems)-1 {
				out[p] = e.GetMode()
				break
			}
			if e.GetType() != "tree" {
				break
			}
			dir = path.Join(dir, el)
			if entries, err = list(dir, e.GetSHA()); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// FileModes is the package function FileModes through the installation's client.
func (g Repos) FileModes(ctx context.Context, inst int64, repo, commit string, paths []string) (map[string]string, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return nil, err
	}
	return calledWith(FileModes(ctx, c, owner, name, commit, paths))
}
