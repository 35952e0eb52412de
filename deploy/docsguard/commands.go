// Package docsguard holds every shell command the README and docs/ show to what it does: its test
// runs each one as written (the release's file names and a real node's name filled in) against real
// API servers with the release bundle hack/release builds, the real kubectl, the real helm and the
// bundle's kubectl-slipway, or runs `make -n` for a make target, or names why it cannot run here and
// the test that proves what it does instead. A command the table does not know fails the test.
package docsguard

import (
	"regexp"
	"strings"
)

// Command is one shell command of a page's sh block: continuation lines joined, as a shell reads it.
type Command struct {
	Page string
	Line int // of its first line
	Text string
}

var (
	fence = regexp.MustCompile("^\\s*```(\\S*)")
	// A command in a comment: "# or, Helm 4: helm install ..." (the tool right after a colon).
	commented = regexp.MustCompile(`^#.*?:\s+((?:helm|kubectl|kubectl-slipway|update-agent|update-operator) .+)$`)
)

// Commands are the commands of page's sh, bash and shell blocks (other blocks show output).
func Commands(page, text string) []Command {
	var out []Command
	in, shell := false, false
	var cur *Command
	for i, line := range strings.Split(text, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			if !in {
				in, shell = true, m[1] == "sh" || m[1] == "bash" || m[1] == "shell"
			} else {
				in, cur = false, nil
			}
			continue
		}
		if !in || !shell {
			continue
		}
		s := strings.TrimSpace(line)
		if cur != nil {
			cur.Text += " " + strings.TrimSpace(strings.TrimSuffix(s, "\\"))
			if !strings.HasSuffix(s, "\\") {
				out, cur = append(out, *cur), nil
			}
			continue
		}
		if s == "" {
			continue
		}
		if strings.HasPrefix(s, "#") {
			if m := commented.FindStringSubmatch(s); m != nil {
				out = append(out, Command{Page: page, Line: i + 1, Text: m[1]})
			}
			continue
		}
		c := Command{Page: page, Line: i + 1, Text: strings.TrimSpace(strings.TrimSuffix(s, "\\"))}
		if strings.HasSuffix(s, "\\") {
			cur = &c
			continue
		}
		out = append(out, c)
	}
	return out
}
