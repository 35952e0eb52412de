package protocol

import (
	"fmt"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/testsupport/docs"
)

// README prints the cycle table; it must say exactly what the code does.
func TestREADMECycleTable(t *testing.T) {
	readme := []byte(docs.All(t, "../.."))
	var rows []string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| ") && strings.Count(line, "|") == 5 && !strings.HasPrefix(line, "| state ") {
			rows = append(rows, line)
		}
	}
	want := make([]string, len(Table))
	for i, r := range Table {
		next := string(r.Next)
		if r.Next == pausedMarker {
			next = "(same)"
		}
		want[i] = fmt.Sprintf("| %s | %s | %s | %s |", r.FromName(), r.When, r.Do, next)
	}
	// The README's cycle table is the run of 4-column rows starting with the first table row.
	start := -1
	for i, l := range rows {
		if l == want[0] {
			start = i
			break
		}
	}
	if start < 0 || len(rows)-start < len(want) {
		t.Fatalf("README has no copy of the cycle table; it should start with %q", want[0])
	}
	for i, w := range want {
		if rows[start+i] != w {
			t.Errorf("README cycle table row %d = %q, want %q", i, rows[start+i], w)
		}
	}
}
