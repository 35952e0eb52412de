package operator

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/testsupport/docs"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/stall"
)

// README prints the effects table (what each cycle action writes, records, notifies and counts); it
// must say exactly what the code does.
func TestREADMEEffectsTable(t *testing.T) {
	readme := []byte(docs.All(t, ".."))
	if want := EffectsTable(); !strings.Contains(string(readme), want) {
		t.Errorf("README has no exact copy of the effects table; it should contain:\n%s", want)
	}
}

// docs/concepts.md lists the admission chain as the code runs it: every gate in order, what it looks
// at (scope) and what the budget plan does with it.
func TestGateTable(t *testing.T) {
	var rows [][]string
	for i, g := range admission.Gates {
		rows = append(rows, []string{strconv.Itoa(i + 1), "`" + g.Name + "`", string(g.Scope), string(g.Plan), g.Doc})
	}
	docs.CheckSection(t, "../docs/concepts.md", "gate table", docs.Table([]string{"", "gate", "scope", "in the plan", "holds a node when"}, rows))
}

// docs/troubleshooting.md has an entry for every kind of blocked-by and every stall reason.
func TestTroubleshootingCoversEveryKind(t *testing.T) {
	page, err := os.ReadFile("../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range admission.Kinds {
		want = append(want, string(k))
	}
	want = append(want, stall.Reasons...)
	for _, k := range want {
		if !strings.Contains(string(page), "### `"+k+"`\n") {
			t.Errorf("docs/troubleshooting.md has no entry \"### `%s`\"", k)
		}
	}
}
