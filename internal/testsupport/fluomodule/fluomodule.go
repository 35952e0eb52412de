// Package fluomodule reads what FLUO v0.9.0's binaries accept from FLUO's own source, in the Go module
// cache (go mod download through the module proxy): the flags its update-operator and update-agent
// define, and the klog flags of the klog version its go.mod pins (FLUO called klog.InitFlags). Tests
// hold Slipway's list of FLUO's flags to it, so the list cannot drift from FLUO. Without a module
// proxy the tests skip, saying so.
package fluomodule

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// Module is FLUO's module and the release Slipway replaces.
const Module = "github.com/flatcar/flatcar-linux-update-operator@v0.9.0"

// dir downloads module (path@version) and returns its directory, or skips t.
func dir(t testing.TB, module string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	var m struct{ Dir, Error string }
	if json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Skipf("%s is not in the module cache and the module proxy did not serve it (%v %s): FLUO's flags are not read from its source", module, err, m.Error)
	}
	return m.Dir
}

// Flags is every flag FLUO's binary ("update-operator" or "update-agent") defines: its own, from
// cmd/<binary>/main.go, and klog's, from the InitFlags of the klog its go.mod requires. Sorted.
func Flags(t testing.TB, binary string) []string {
	t.Helper()
	root := dir(t, Module)
	names := calls(t, filepath.Join(root, "cmd", binary, "main.go"), "flag", "")
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`(?m)^\s*k8s\.io/klog/v2 (v\S+)`).FindSubmatch(gomod)
	if v == nil {
		t.Fatalf("FLUO's go.mod requires no k8s.io/klog/v2")
	}
	klog := dir(t, "k8s.io/klog/v2@"+string(v[1]))
	names = append(names, calls(t, filepath.Join(klog, "klog.go"), "flagset", "InitFlags")...)
	slices.Sort(names)
	return slices.Compact(names)
}

// calls are the flag names defined in file by calls recv.String/Bool/Int/Uint64/Duration/Var and their
// ...Var forms (within function fn only, when fn is not "").
func calls(t testing.TB, file, recv, fn string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	nameArg := map[string]int{"String": 0, "Bool": 0, "Int": 0, "Int64": 0, "Uint64": 0, "Duration": 0, "Float64": 0,
		"Var": 1, "StringVar": 1, "BoolVar": 1, "IntVar": 1, "Int64Var": 1, "Uint64Var": 1, "DurationVar": 1, "Float64Var": 1}
	var names []string
	var scope ast.Node = f
	if fn != "" {
		scope = nil
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
				scope = fd
			}
		}
		if scope == nil {
			t.Fatalf("%s has no func %s", file, fn)
		}
	}
	ast.Inspect(scope, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		i, known := nameArg[sel.Sel.Name]
		if !ok || x.Name != recv || !known || len(call.Args) <= i {
			return true
		}
		if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				names = append(names, s)
			}
		}
		return true
	})
	if len(names) == 0 {
		t.Fatalf("no %s.* flag definitions found in %s", recv, file)
	}
	return names
}
