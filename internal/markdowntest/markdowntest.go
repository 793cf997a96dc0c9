// Package markdowntest reads GitHub-flavoured Markdown as a renderer does, for tests
// that check what text the service writes is shown as code and what is read as
// Markdown.
package markdowntest

import (
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// Read is what a renderer makes of md: the text it reads as Markdown (outside code
// blocks and spans), the code blocks' contents, and the destinations of links and
// images, bare URLs included.
type Read struct {
	Prose        string
	CodeBlocks   []string
	Destinations []string
}

// Parse reads md with GitHub's extensions (tables, strikethrough, bare links).
func Parse(md string) Read {
	src := []byte(md)
	doc := goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser().Parse(text.NewReader(src))
	var r Read
	var prose strings.Builder
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch x := n.(type) {
		case *ast.FencedCodeBlock, *ast.CodeBlock:
			var b strings.Builder
			lines := n.Lines()
			for i := 0; i < lines.Len(); i++ {
				seg := lines.At(i)
				b.Write(seg.Value(src))
			}
			r.CodeBlocks = append(r.CodeBlocks, b.String())
			return ast.WalkSkipChildren, nil
		case *ast.CodeSpan:
			return ast.WalkSkipChildren, nil
		case *ast.Link:
			r.Destinations = append(r.Destinations, string(x.Destination))
		case *ast.Image:
			r.Destinations = append(r.Destinations, string(x.Destination))
		case *ast.AutoLink:
			r.Destinations = append(r.Destinations, string(x.URL(src)))
		case *ast.Text:
			prose.Write(x.Segment.Value(src))
			prose.WriteString("\n")
		case *ast.String:
			prose.Write(x.Value)
		}
		return ast.WalkContinue, nil
	})
	r.Prose = prose.String()
	return r
}
