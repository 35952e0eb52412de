package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The operator must not be able to execute a text/template. Executing one looks methods up by name
// at run time, so the linker then keeps every exported method of every type that reaches an
// interface: shoutrrr's e-mail, generic and logger services did that (operator/notify: services),
// making the binary 88 MB instead of 55 and its resident memory at 5,000 nodes 75 MiB instead of 62
// (docs/performance.md). The linker's own dependency dump says what reaches it; the failure prints
// the path, from main to the template, so the dependency to avoid is named.
func TestNoReflectiveTemplates(t *testing.T) {
	if testing.Short() {
		t.Skip("links the update-operator (go build): not under -short")
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "update-operator"), "-ldflags=-dumpdep", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var deps bytes.Buffer
	cmd.Stderr = &deps
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build -ldflags=-dumpdep: %v\n%s", err, tail(deps.String(), 2000))
	}
	// Each line is "from -> to" as the linker marks symbols reachable; the first edge to a symbol is
	// the one that reached it.
	reachedFrom := map[string]string{}
	sc := bufio.NewScanner(&deps)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	edges := 0
	for sc.Scan() {
		from, to, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		edges++
		from, to = strings.TrimSuffix(from, " <ReflectMethod>"), strings.TrimSuffix(to, " <ReflectMethod>")
		if _, seen := reachedFrom[to]; !seen {
			reachedFrom[to] = from
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if edges < 10000 || reachedFrom["main.main"] == "" {
		t.Fatalf("the linker's dependency dump has %d edges and no main.main: its format changed, read it again", edges)
	}
	const evalField = "text/template.(*state).evalField"
	if _, reached := reachedFrom[evalField]; !reached {
		return
	}
	path := []string{evalField}
	for s := reachedFrom[evalField]; s != "" && !slices.Contains(path, s) && len(path) < 100; s = reachedFrom[s] {
		path = append(path, s)
	}
	slices.Reverse(path)
	t.Errorf("the update-operator can execute a text/template (the linker then keeps every exported method; see the comment above); reached by:\n  %s",
		strings.Join(path, "\n  "))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
