package nodeconfig

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// One config, written in every stable spec 3.x the pinned Ignition library knows, is accepted and
// applied identically: Parse translates older versions up with Ignition's own translators, as
// Ignition does for the configs it fetches. Butane emits 3.0.0 (fcos 1.0.0) to 3.4.0 (flatcar
// 1.1.0) and newer; fleets provisioned years ago hold the older ones.
func TestEveryStableSpecVersionAppliesAlike(t *testing.T) {
	const body = `"storage":{
		"directories":[{"path":"/var/lib/app","mode":448}],
		"files":[{"path":"/etc/app.conf","mode":384,"overwrite":true,"contents":{"source":"data:,a%3D1%0A"}},
		         {"path":"/etc/app.empty"}],
		"links":[{"path":"/etc/app.link","target":"/etc/app.conf"}]},
	"systemd":{"units":[{"name":"locksmithd.service","mask":true},
		{"name":"app.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
		 "dropins":[{"name":"10-env.conf","contents":"[Service]\nEnvironment=A=1\n"}]}]}`
	var (
		first      tree
		firstCalls []string
	)
	for _, v := range []string{"3.4.0", "3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.5.0", "3.6.0"} {
		t.Run(v, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
				t.Fatal(err)
			}
			sd := newFake()
			sd.file["locksmithd.service"], sd.active["locksmithd.service"] = "enabled", "active"
			cfg, _, err := Parse([]byte(`{"ignition":{"version":"` + v + `"},` + body + `}`))
			if err != nil {
				t.Fatal(err)
			}
			plan, err := Compute(context.Background(), cfg, root, sd, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := plan.Apply(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := readTree(t, root)
			if first == nil {
				first, firstCalls = got, sd.calls
				if got["/etc/app.conf"] != file(0o600, "a=1\n") || got["/var/lib/app"] != dir(0o700) {
					t.Fatalf("3.4.0 not applied as declared: %v", got)
				}
				return
			}
			if d := diffTrees(got, first); d != "" {
				t.Errorf("tree differs from 3.4.0's:\n%s", d)
			}
			if !reflect.DeepEqual(sd.calls, firstCalls) {
				t.Errorf("systemd calls %q, 3.4.0 made %q", sd.calls, firstCalls)
			}
		})
	}
}

// What is not a stable spec 3.x is refused with Ignition's own words.
func TestUnstableAndOtherVersionsAreRefused(t *testing.T) {
	for _, v := range []string{"3.7.0-experimental", "2.3.0", "3.99.0", "1.0.0"} {
		_, _, err := Parse([]byte(`{"ignition":{"version":"` + v + `"}}`))
		if err == nil || !strings.Contains(err.Error(), "not a valid Ignition config") {
			t.Errorf("%s: %v", v, err)
		}
	}
}
