// Package docs reads what the project documents for people: README.md and every Markdown page under
// docs/. Tests that hold the documentation to the code (every flag documented, the cycle and effects
// tables exactly as the code has them) read all of it, so a fact may live on whichever page suits a
// reader without the test caring which. The pages under docs/reference/ are generated from the code
// by tests (CheckGenerated), which fail when a page is stale.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// All returns README.md and docs/**/*.md of the repository at root, concatenated (pages in path
// order, each after a blank line).
func All(t testing.TB, root string) string {
	t.Helper()
	paths := []string{filepath.Join(root, "README.md")}
	var pages []string
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(pages)
	var b strings.Builder
	for _, p := range append(paths, pages...) {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(text)
		b.WriteString("\n\n")
	}
	return b.String()
}
