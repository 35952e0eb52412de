package protocol

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/testsupport/docs"
)

// docs/reference/annotations.md is generated from keys.go (`make docs`): every key, who may write it
// (Owners) and its doc comment there, so what a key means is written once, where it is defined.
func TestKeyReference(t *testing.T) {
	src := parseKeys(t, "keys.go")
	var fluo, slipway, other [][]string
	listed := map[string]bool{}
	for _, r := range src.rows {
		var keys, writers []string
		for _, k := range r.keys {
			keys = append(keys, "`"+k+"`")
			w := "—"
			if o, ok := Owners[k]; ok {
				w = string(o)
			}
			if !slices.Contains(writers, w) {
				writers = append(writers, w)
			}
			listed[k] = true
		}
		row := []string{strings.Join(keys, "<br>"), strings.Join(writers, ", "), docs.Prose(r.doc)}
		switch {
		case strings.HasPrefix(r.keys[0], FLUOPrefix):
			fluo = append(fluo, row)
		case strings.HasPrefix(r.keys[0], SlipwayPrefix):
			slipway = append(slipway, row)
		default:
			other = append(other, row)
		}
	}
	for k := range Owners {
		if !listed[k] {
			t.Errorf("Owners has %q, which is no constant of keys.go with a doc comment", k)
		}
	}
	head := []string{"key", "written by", "meaning (the constant's doc comment)"}
	page := "# Node labels and annotations\n\n" +
		"Generated from [internal/protocol/keys.go](../../internal/protocol/keys.go) by `make docs` " +
		"(`TestKeyReference` fails when it is stale): every key, who may write it (`protocol.Owners`; " +
		"— where it names no one) and what it means. Hook annotations (`--before-reboot-annotations`, " +
		"`--after-reboot-annotations`) are chosen at run time and not listed.\n\n" +
		"`" + True + "`, `" + False + "`: " + docs.Prose(src.docs["True"]) + "\n\n" +
		"## FLUO's keys\n\n`" + FLUOPrefix + "`: " + docs.Prose(src.docs["FLUOPrefix"]) + "\n\n" + docs.Table(head, fluo) +
		"\n## Slipway's keys\n\n`" + SlipwayPrefix + "`: " + docs.Prose(src.docs["SlipwayPrefix"]) + "\n\n" + docs.Table(head, slipway) +
		"\n## Other keys\n\n" + docs.Table(head, other)
	docs.CheckGenerated(t, "../../docs/reference/annotations.md", page)
}

// keySource is what keys.go says: its key constants in source order, one row per doc comment (the
// constants after a commented one that have none of their own share its comment), and the doc
// comment of every other constant and variable by name.
type keySource struct {
	rows []keyRow
	docs map[string]string
}

type keyRow struct {
	names, keys []string
	doc         string
}

// parseKeys reads the constants of file, a Go file of this package that needs no other file to
// type-check. A key is a string constant with a "/" that does not end in one (a prefix does).
func parseKeys(t *testing.T, file string) keySource {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	if _, err := (&types.Config{}).Check("protocol", fset, []*ast.File{f}, info); err != nil {
		t.Fatalf("%s must type-check on its own: %v", file, err)
	}
	src := keySource{docs: map[string]string{}}
	text := func(g *ast.CommentGroup) string { return strings.Join(strings.Fields(g.Text()), " ") }
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
			continue
		}
		row := -1 // the row the constants without a comment join
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			doc := vs.Doc
			if doc == nil && gd.Lparen == token.NoPos {
				doc = gd.Doc // `const X = ...`: the comment is the declaration's
			}
			if doc != nil {
				row = -1
			}
			for _, n := range vs.Names {
				switch {
				case doc != nil:
					src.docs[n.Name] = text(doc)
				case gd.Doc != nil:
					src.docs[n.Name] = text(gd.Doc) // True and False: the group says what they are
				}
				c, ok := info.Defs[n].(*types.Const)
				if !ok || c.Val().Kind() != constant.String {
					continue
				}
				v := constant.StringVal(c.Val())
				if !strings.Contains(v, "/") || strings.HasSuffix(v, "/") {
					continue
				}
				if row < 0 {
					if doc == nil {
						t.Errorf("%s: key %s has no doc comment", fset.Position(n.Pos()), n.Name)
						continue
					}
					src.rows = append(src.rows, keyRow{doc: text(doc)})
					row = len(src.rows) - 1
				}
				src.rows[row].names = append(src.rows[row].names, n.Name)
				src.rows[row].keys = append(src.rows[row].keys, v)
			}
		}
	}
	return src
}
