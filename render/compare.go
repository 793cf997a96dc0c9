package render

import (
	"context"
	"sort"
)

// Reached is an Application a change reaches, and the changed files its render
// reads.
type Reached struct {
	App   Application
	Files []string
}

// Affected lists the Applications among apps whose render reads one of files
// (repository paths, as a pull request names them) in the tree at repoDir, in
// the order given, each with the files it reads. It is the reach Plan proves an
// edit with, asked for a change someone else made: an app whose reach cannot be
// known counts as affected by any file under its path. treeID, when set,
// identifies the tree's content as for Request.TreeID, so the reaches are shared
// with plans on the same commit.
//
// Files added by the change are judged by the tree before it, which is enough:
// a new file is read only through a file that names it (a kustomization, which
// then changes too) or a directory pattern (which reach matches by path).
func Affected(ctx context.Context, repoDir, treeID string, apps []Application, files []string) ([]Reached, error) {
	if len(apps) == 0 || len(files) == 0 {
		return nil, nil
	}
	t, err := openIndexedTree(repoDir, treeID)
	if err != nil {
		return nil, err
	}
	p := &planner{ctx: ctx, req: Request{RepoDir: repoDir, TreeID: treeID}, t: t, apps: apps, r: newRenderer(ctx),
		before: newView(t, nil), reachCache: map[string]*reachCall{}}
	defer p.precomputeReaches()()
	var out []Reached
	for _, app := range apps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var read []string
		for _, f := range files {
			if p.reaches(app, t.key(f)) {
				read = append(read, f)
			}
		}
		if len(read) > 0 {
			out = append(out, Reached{App: app, Files: read})
		}
	}
	return out, nil
}

// CompareRenders is what changes in the cluster for one Application between two
// of its renders (Render's output), object by object in a stable order, masked as
// a plan's cluster diff is. A render that holds an object twice is a *Refusal.
func CompareRenders(app Application, before, after []Object) ([]ObjectDiff, error) {
	b, err := importObjects(app, before)
	if err != nil {
		return nil, err
	}
	a, err := importObjects(app, after)
	if err != nil {
		return nil, err
	}
	bk, err := keyed(app, b)
	if err != nil {
		return nil, err
	}
	ak, err := keyed(app, a)
	if err != nil {
		return nil, err
	}
	keys := make([]objKey, 0, len(bk)+len(ak))
	for k := range bk {
		keys = append(keys, k)
	}
	for k := range ak {
		if _, ok := bk[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })
	var out []ObjectDiff
	for _, k := range keys {
		was, is := bk[k], ak[k]
		if was != nil && is != nil && equalValues(was.body, is.body) {
			continue
		}
		out = append(out, objectDiff(app.Name, k, was, is))
	}
	return out, nil
}
