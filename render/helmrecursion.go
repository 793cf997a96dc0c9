package render

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"text/template/parse"

	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// recursiveTemplates returns a cycle of named templates of ch (its subcharts'
// included: Helm parses them into one set) that include or call each other by
// constant name, as "a -> b -> a", or "" when there is none.
//
// Render refuses such a chart before Helm runs it. Helm stops a recursion only
// at 1,000 nested includes of each name, and the template engine cannot be
// interrupted: a recursion across many names grows the render's stack past a
// gigabyte, one that prints what it includes twice doubles its output at each
// level, and either ends the process, not the render. A recursion through a
// name computed at render time (include of a variable, tpl of a value) is not
// seen here.
func recursiveTemplates(ch *chart.Chart) string {
	edges := map[string][]string{}
	var names []string
	var collect func(c *chart.Chart)
	collect = func(c *chart.Chart) {
		for _, dep := range c.Dependencies() {
			collect(dep)
		}
		for _, f := range c.Templates {
			if f == nil {
				continue
			}
			name := path.Join(c.ChartFullPath(), f.Name)
			treeSet := map[string]*parse.Tree{}
			t := parse.New(name)
			t.Mode = parse.SkipFuncCheck
			if _, err := t.Parse(string(f.Data), "", "", treeSet); err != nil {
				continue // Helm reports it when it parses the chart
			}
			for n, tree := range treeSet {
				if tree.Root == nil {
					continue
				}
				if _, seen := edges[n]; !seen {
					names = append(names, n)
				}
				// A later definition of a name replaces an earlier one, as
				// in Helm's set; the order only decides which cycle is named.
				edges[n] = calledTemplates(tree.Root, nil)
			}
		}
	}
	collect(ch)
	slices.Sort(names)

	const (
		unvisited = iota
		onPath
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = onPath
		stack = append(stack, n)
		for _, m := range edges[n] {
			if _, defined := edges[m]; !defined {
				continue
			}
			switch state[m] {
			case onPath:
				i := slices.Index(stack, m)
				return append(slices.Clone(stack[i:]), m)
			case unvisited:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for _, n := range names {
		if state[n] == unvisited {
			if c := visit(n); c != nil {
				if len(c) > 8 {
					// A ring of many names: its start and its length say enough.
					return fmt.Sprintf("%s -> ... -> %s, a ring of %d templates", strings.Join(c[:5], " -> "), c[len(c)-1], len(c)-1)
				}
				return strings.Join(c, " -> ")
			}
		}
	}
	return ""
}

// calledTemplates appends the names n includes (include "name", template
// "name") to out.
func calledTemplates(n parse.Node, out []string) []string {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return out
		}
		for _, c := range x.Nodes {
			out = calledTemplates(c, out)
		}
	case *parse.ActionNode:
		out = calledTemplates(x.Pipe, out)
	case *parse.TemplateNode:
		out = append(out, x.Name)
		if x.Pipe != nil {
			out = calledTemplates(x.Pipe, out)
		}
	case *parse.IfNode:
		out = calledInBranch(&x.BranchNode, out)
	case *parse.RangeNode:
		out = calledInBranch(&x.BranchNode, out)
	case *parse.WithNode:
		out = calledInBranch(&x.BranchNode, out)
	case *parse.PipeNode:
		if x == nil {
			return out
		}
		for _, c := range x.Cmds {
			out = calledTemplates(c, out)
		}
	case *parse.CommandNode:
		if len(x.Args) >= 2 {
			if id, ok := x.Args[0].(*parse.IdentifierNode); ok && id.Ident == "include" {
				if s, ok := x.Args[1].(*parse.StringNode); ok {
					out = append(out, s.Text)
				}
			}
		}
		for _, a := range x.Args {
			out = calledTemplates(a, out)
		}
	case *parse.ChainNode:
		out = calledTemplates(x.Node, out)
	}
	return out
}

func calledInBranch(b *parse.BranchNode, out []string) []string {
	out = calledTemplates(b.Pipe, out)
	out = calledTemplates(b.List, out)
	if b.ElseList != nil {
		out = calledTemplates(b.ElseList, out)
	}
	return out
}
