package web

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"

	changesapi "github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// changeView is what a change's page shows: the change API's view (one conversion
// of a plan for people), its request as indented JSON and its cluster diff by app.
type changeView struct {
	changesapi.ChangeView
	Login   string
	Request string
	Apps    []appDiff
	Events  []changesapi.EventView
}

// appDiff is the cluster diff of one Application.
type appDiff struct {
	App     string
	Objects []objectDiff
}

// objectDiff is one object's diff as shown: for a Secret, only which fields
// change; Renamed says which generated object an added or removed one is
// under its other name (render.RenameNote).
type objectDiff struct {
	render.ObjectDiff
	Secret  bool
	Renamed string
}

func changePage(pl store.Plan, events []store.PlanEvent, login string) changeView {
	v := changeView{ChangeView: changesapi.View(pl), Login: login}
	for _, e := range events {
		v.Events = append(v.Events, changesapi.EventView{At: e.CreatedAt, Actor: e.Actor, From: e.FromStatus, To: e.ToStatus, Step: e.Step, Message: e.Message})
	}
	v.Request = requestText(v.ChangeView)
	v.Apps = byApp(v.ClusterDiff, v.Renames)
	return v
}

// byApp groups a cluster diff by Application, in name order, each object as a page
// shows it (see masked).
func byApp(diffs []render.ObjectDiff, renames []render.Rename) []appDiff {
	index := map[string]*appDiff{}
	for _, d := range diffs {
		a := index[d.App]
		if a == nil {
			a = &appDiff{App: d.App}
			index[d.App] = a
		}
		od := masked(d)
		od.Renamed = render.RenameNote(renames, d)
		a.Objects = append(a.Objects, od)
	}
	out := make([]appDiff, 0, len(index))
	for _, a := range index {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].App < out[j].App })
	return out
}

// masked is an object's diff as a page shows it: a Secret's without any value.
func masked(d render.ObjectDiff) objectDiff {
	od := objectDiff{ObjectDiff: d, Secret: changesapi.IsSecretKind(d.Kind)}
	if od.Secret {
		// render masks Secret values already; a page shows none at all, so a value
		// masked by mistake upstream still stays off the screen.
		od.Diff = ""
		od.Changes = slices.Clone(od.Changes)
		for i := range od.Changes {
			od.Changes[i].Before, od.Changes[i].After = "", ""
		}
	}
	return od
}

// requestText is the requested change as indented JSON; for a Secret, only that it is
// one. A revert says which change it reverts, and shows that change as it was asked
// for.
func requestText(v changesapi.ChangeView) string {
	if changesapi.IsSecretKind(v.Target.Kind) {
		return "(a change of a Secret: its values are not shown)"
	}
	var rc changesapi.RevertChange
	if v.RollbackOf != "" && json.Unmarshal(v.Change, &rc) == nil && rc.Revert.Plan != "" {
		what := "Reverts change " + rc.Revert.Plan
		if rc.Revert.MergeCommit != "" {
			what += ", merged as " + rc.Revert.MergeCommit
		}
		return what + ", which was:\n" + indented(rc.Revert.Undoes)
	}
	return indented(v.Change)
}

func indented(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// diffLine is one line of a unified diff with the class that colours it.
type diffLine struct{ Class, Text string }

func diffLines(diff string) []diffLine {
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	out := make([]diffLine, 0, len(lines))
	for _, l := range lines {
		class := "ctx"
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "diff "):
			class = "file"
		case strings.HasPrefix(l, "@@"):
			class = "hunk"
		case strings.HasPrefix(l, "+"):
			class = "add"
		case strings.HasPrefix(l, "-"):
			class = "del"
		}
		out = append(out, diffLine{Class: class, Text: l})
	}
	return out
}
