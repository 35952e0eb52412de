// Command gen is `make butane`: it regenerates the Ignition file beside every snippet in
// butane/snippets. Tests fail when a committed .ign is stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/butane"
)

func main() {
	dir := "snippets"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	srcs, err := butane.Snippets(dir)
	if err != nil || len(srcs) == 0 {
		fmt.Fprintln(os.Stderr, "gen: no snippets in", dir, err)
		os.Exit(1)
	}
	for _, src := range srcs {
		out, err := butane.Translate(src)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(butane.Output(src), out, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", butane.Output(src))
		// deploy/node-prep applies this one to running nodes; kustomize reads files only below its
		// directory, so it keeps a copy (deploy's TestNodePrepConfigIsTheSnippet).
		if filepath.Base(src) == "flatcar-slipway.bu" {
			copyTo := filepath.Join("..", "deploy", "node-prep", "flatcar-slipway.ign")
			if err := os.WriteFile(copyTo, out, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "gen:", err)
				os.Exit(1)
			}
			fmt.Println("wrote", copyTo)
		}
	}
}
