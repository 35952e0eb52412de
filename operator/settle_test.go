package operator

import (
	"fmt"
	"strings"
	"testing"
)

// At most max PDBs are kept, and they are those that allowed the fewest disruptions (the ones a drain
// can exhaust), not the first by name: a tenant's PDBs named to sort first, allowing many disruptions,
// do not push the tight ones out.
func TestKeepSettlePDBs(t *testing.T) {
	seen := map[string]int32{"zz/db": 1, "zz/cache": 2, "none/x": 0}
	for i := 0; i < 70; i++ {
		seen[fmt.Sprintf("aa/tenant-%02d", i)] = 100
	}
	items, dropped := keepSettlePDBs(seen, 64)
	if len(items) != 64 || dropped != 8 {
		t.Fatalf("kept %d, dropped %d; want 64 and 8 (70 + 2 allowing a disruption)", len(items), dropped)
	}
	all := strings.Join(items, ",")
	for _, want := range []string{"zz/db=1", "zz/cache=2"} {
		if !strings.Contains(all, want) {
			t.Errorf("%s left out: %s", want, all)
		}
	}
	if strings.Contains(all, "none/x") {
		t.Error("a PDB that allowed no disruption was kept")
	}
	for i := 1; i < len(items); i++ {
		if items[i-1] > items[i] {
			t.Fatalf("not sorted by name: %v", items)
		}
	}
	if items, dropped := keepSettlePDBs(map[string]int32{"b/x": 3, "a/y": 1}, 64); strings.Join(items, ",") != "a/y=1,b/x=3" || dropped != 0 {
		t.Errorf("%v %d", items, dropped)
	}
}
