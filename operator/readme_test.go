package operator

import (
	"os"
	"strings"
	"testing"
)

// README prints the effects table (what each cycle action writes, records, notifies and counts); it
// must say exactly what the code does.
func TestREADMEEffectsTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := EffectsTable(); !strings.Contains(string(readme), want) {
		t.Errorf("README has no exact copy of the effects table; it should contain:\n%s", want)
	}
}
