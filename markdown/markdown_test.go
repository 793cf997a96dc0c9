package markdown_test

import (
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/markdowntest"
	"github.com/kukie/kukie-gitops/markdown"
)

// hostile is what a repository can hold in a file a diff shows: lines that close a
// fixed fence (as a diff's context line " ```" does) and Markdown after them.
var hostile = []string{
	" ```\n @acme/admins this is approved, merge it\n ![x](https://tracker.example/p.png)\n",
	"+````\n+[click](https://phish.example)\n",
	" ~~~\n ```````\n @acme/admins\n",
	"```diff\n@acme/admins\n```\n",
	"",
	"no fence at all, @acme/admins",
}

// TestCodeBlockCannotBeClosedByItsBody reads each fenced body as a renderer does:
// one code block holding the body as given, and nothing of it read as Markdown.
func TestCodeBlockCannotBeClosedByItsBody(t *testing.T) {
	for _, body := range hostile {
		got := markdowntest.Parse("before\n\n" + markdown.CodeBlock("diff", body) + "\nafter\n")
		if len(got.CodeBlocks) != 1 || got.CodeBlocks[0] != strings.TrimRight(body, "\n")+strings.Repeat("\n", min(1, len(body))) {
			t.Errorf("CodeBlock(%q): code blocks %q", body, got.CodeBlocks)
		}
		if got.Prose != "before\nafter\n" || len(got.Destinations) != 0 {
			t.Errorf("CodeBlock(%q): read as Markdown %q, links %q", body, got.Prose, got.Destinations)
		}
	}
}

// TestCodeShowsItsTextAsCode: a span holding backticks stays one span.
func TestCodeShowsItsTextAsCode(t *testing.T) {
	for _, s := range []string{"apps/web", "a`b", "`x` @acme/admins ![i](https://t.example/p)", "``", "line\nbreak [l](https://x.example)"} {
		got := markdowntest.Parse("path " + markdown.Code(s) + " end\n")
		if got.Prose != "path \n end\n" || len(got.Destinations) != 0 {
			t.Errorf("Code(%q) = %q: read as Markdown %q, links %q", s, markdown.Code(s), got.Prose, got.Destinations)
		}
	}
}

func TestOpenFence(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", ""},
		{"```diff\n+a\n", "```"},
		{"```diff\n+a\n```\n", ""},
		{"````diff\n```\n", "````"},
		{"````diff\n```\n`````\n", ""},
		{"~~~\n```\n", "~~~"},
		{"   ```\nx\n", "```"},
		{"    ```\nx\n", ""},       // indented four spaces: code, not a fence
		{"```a`b\nx\n", ""},        // a backtick in the info string: no fence
		{"```\nx\n``` y\n", "```"}, // a closing fence has nothing after it
		{"```\nx\n```", ""},
	} {
		if got := markdown.OpenFence(c.text); got != c.want {
			t.Errorf("OpenFence(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// TestNameKeepsPlainNamesAndQuotesOthers: a Kubernetes name is written as it is; a
// name that Markdown would read as a mention, image, link or emphasis is code.
func TestNameKeepsPlainNamesAndQuotesOthers(t *testing.T) {
	for _, s := range []string{"ConfigMap shop/web-settings-c4kffct259", "renamed to web.v2", "apps/web"} {
		if got := markdown.Name(s); got != s {
			t.Errorf("Name(%q) = %q, want it as it is", s, got)
		}
	}
	for _, s := range []string{"ConfigMap @acme/admins", "x ![i](https://t.example/p.png)", "Namespace www.phish.example", "a_b_", "<https://x.example>"} {
		got := markdowntest.Parse("**" + markdown.Name(s) + "** end\n")
		if got.Prose != " end\n" || len(got.Destinations) != 0 {
			t.Errorf("Name(%q) = %q: read as Markdown %q, links %q", s, markdown.Name(s), got.Prose, got.Destinations)
		}
	}
}

// TestCodeLineIsOneLineOfCode: a reason over several lines, with runs of spaces
// and tabs, is one code span with single spaces.
func TestCodeLineIsOneLineOfCode(t *testing.T) {
	if got, want := markdown.CodeLine("kustomize:\n  accumulating\tresources `x`\n"), "`` kustomize: accumulating resources `x` ``"; got != want {
		t.Errorf("CodeLine = %q, want %q", got, want)
	}
}
