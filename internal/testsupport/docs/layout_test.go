package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// docs/development.md's Layout lists every Go package of the product module, one line each: a package
// added without a line there, or a line left for a package that went, fails here.
func TestLayoutListsEveryPackage(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := layoutPackages(t, string(b))
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	have := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, "github.com/slipway-dev/slipway"), "/")
		if rel == "" {
			continue // the module root holds no Go package of its own
		}
		have[rel] = true
		if !listed[rel] {
			t.Errorf("package %s has no line in docs/development.md's Layout", rel)
		}
	}
	for p := range listed {
		if !have[p] && !strings.HasPrefix(p, "e2e") && !strings.HasPrefix(p, "hack") && p != "deploy" {
			// e2e/, hack/ and deploy/ hold modules or tests of their own: not in `go list ./...` here.
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("docs/development.md's Layout lists %s, which is no package", p)
			}
		}
	}
}

// layoutPackages reads the package column of the Layout's code block: "dir/a, b" names dir/a and dir/b;
// continuation lines (indented) name none.
func layoutPackages(t *testing.T, md string) map[string]bool {
	t.Helper()
	_, after, ok := strings.Cut(md, "\n## Layout\n")
	if !ok {
		t.Fatal("docs/development.md has no ## Layout section")
	}
	_, block, ok := strings.Cut(after, "```\n")
	if !ok {
		t.Fatal("the Layout section has no code block")
	}
	block, _, _ = strings.Cut(block, "```")
	out := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		if line == "" || line[0] == ' ' {
			continue
		}
		col, _, _ := strings.Cut(line, "  ")
		dir := ""
		for i, name := range strings.Split(strings.TrimSpace(col), ", ") {
			name = strings.TrimSuffix(name, "/")
			if i == 0 {
				dir = filepath.Dir(name)
			} else if !strings.Contains(name, "/") {
				name = filepath.Join(dir, name)
			}
			out[name] = true
		}
	}
	if len(out) < 20 {
		t.Fatalf("read only %d packages from the Layout: %v", len(out), out)
	}
	return out
}
