package docs

import (
	"os"
	"strings"
	"testing"
)

// UpdateVar is the environment variable under which CheckGenerated writes pages instead of checking
// them: `make docs` sets it.
const UpdateVar = "SLIPWAY_UPDATE_DOCS"

// CheckGenerated holds a page generated from the code (under docs/reference/) to the code: the file
// at path must be exactly want, or the test fails saying to run `make docs` and where the page first
// differs. With UpdateVar set it writes want there instead.
func CheckGenerated(t testing.TB, path, want string) {
	t.Helper()
	if os.Getenv(UpdateVar) != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `make docs` to generate it", err)
	}
	if string(got) == want {
		return
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(want, "\n")
	for i := 0; ; i++ {
		g, w := "(end of file)", "(end of file)"
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("%s is stale: run `make docs` (it is generated from the code). Line %d is\n\t%s\nand should be\n\t%s", path, i+1, g, w)
		}
	}
}

// Table renders a Markdown table with header head. A cell may hold any text: a "|" is escaped and
// line breaks become spaces, so a comment or help text copied from the code stays in its cell.
func Table(head []string, rows [][]string) string {
	var b strings.Builder
	line := func(cells []string) {
		for _, c := range cells {
			b.WriteString("| ")
			b.WriteString(Cell(c))
			b.WriteString(" ")
		}
		b.WriteString("|\n")
	}
	line(head)
	b.WriteString(strings.Repeat("|---", len(head)) + "|\n")
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// Cell makes s fit in one Markdown table cell.
func Cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\r\n", " ", "\n", " ").Replace(strings.TrimSpace(s))
}

// Prose makes plain text from the code (a doc comment, a help string) safe as Markdown: "<why>" stays
// visible instead of being taken for an HTML tag. Not for text inside backticks, where "\<" would show.
func Prose(s string) string {
	return strings.ReplaceAll(s, "<", `\<`)
}

// CheckSection holds the part of a hand-written page between the lines `<!-- BEGIN name -->` and
// `<!-- END name -->` to want (generated from the code), as CheckGenerated holds a whole page: with
// UpdateVar set it writes want there instead.
func CheckSection(t testing.TB, path, name, want string) {
	t.Helper()
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- BEGIN "+name+" (make docs) -->\n", "<!-- END "+name+" -->\n"
	before, rest, ok := strings.Cut(string(page), begin)
	got, after, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("%s has no section between %q and %q: add those two lines where the generated %s goes, then run `make docs`", path, strings.TrimSpace(begin), strings.TrimSpace(end), name)
	}
	if got == want {
		return
	}
	if os.Getenv(UpdateVar) != "" {
		if err := os.WriteFile(path, []byte(before+begin+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s: the %s is stale: run `make docs` (it is generated from the code). It should be:\n%s", path, name, want)
}
