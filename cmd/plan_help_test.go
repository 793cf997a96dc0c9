package cmd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/render"
)

// TestPlanHelpListsEveryRefusal: plan --help lists every refusal code render
// defines (its Code constants, and any code a Refusal or refuse call spells
// out), each once, with what it means; only a revert's code is left out, since
// the command makes no revert. A new refusal code fails here until the help
// says what it means.
func TestPlanHelpListsEveryRefusal(t *testing.T) {
	codes := renderRefusalCodes(t)
	if len(codes) < 20 {
		t.Fatalf("found %d refusal codes in render (%v): the search of its source is broken", len(codes), codes)
	}
	revertOnly := map[string]bool{render.CodeNoLongerApplies: true}
	listed := map[string]bool{}
	for _, r := range planRefusals {
		if listed[r.code] {
			t.Errorf("%s is listed twice", r.code)
		}
		listed[r.code] = true
		if revertOnly[r.code] {
			t.Errorf("%s is listed, but only a revert refuses with it", r.code)
		}
		if !slices.Contains(codes, r.code) {
			t.Errorf("%s is listed, but render defines no such refusal code", r.code)
		}
		if strings.TrimSpace(r.means) == "" {
			t.Errorf("%s is listed without what it means", r.code)
		}
	}
	for _, c := range codes {
		if !listed[c] && !revertOnly[c] {
			t.Errorf("render refuses with %s, which plan --help does not list", c)
		}
	}

	code, stdout, stderr := runPlanCmd(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d: %s", code, stderr)
	}
	_, refusals, ok := strings.Cut(stdout, "\nRefusals (exit code 2")
	if !ok {
		t.Fatalf("--help has no list of refusals:\n%s", stdout)
	}
	refusals, _, _ = strings.Cut(refusals, "\nFlags:")
	for _, r := range planRefusals {
		first, _, _ := strings.Cut(r.means, " ")
		if !strings.Contains(refusals, "\n  "+r.code+" ") || !strings.Contains(refusals, " "+first+" ") {
			t.Errorf("--help's refusals lack %s and what it means:\n%s", r.code, refusals)
		}
	}
}

// renderRefusalCodes reads render's source for the refusal codes it defines:
// the values of its Code constants, and any string literal given as a
// Refusal's Code or as refuse's first argument.
func renderRefusalCodes(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("../render")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("../render", e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var codes []string
	add := func(e ast.Expr) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(codes, v) {
			codes = append(codes, v)
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if strings.HasPrefix(name.Name, "Code") && i < len(vs.Values) {
							add(vs.Values[i])
						}
					}
				}
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Refusal" {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
								add(kv.Value)
							}
						}
					}
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "refuse" && len(n.Args) > 0 {
					add(n.Args[0])
				}
			}
			return true
		})
	}
	slices.Sort(codes)
	return codes
}
