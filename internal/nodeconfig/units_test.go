package nodeconfig

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Ignition only checks a unit's suffix (.service, ...) and a drop-in's (.conf), so "../../x.service"
// is a valid Ignition config. Names are file names in /etc/systemd/system: anything else is refused
// before the config's other entries are applied and before systemd is asked anything.
func TestUnitNamesMustBePlainFileNames(t *testing.T) {
	for name, units := range map[string]string{
		"unit climbing out":         `[{"name":"../../../../../x.service","contents":"[Service]\nExecStart=/bin/true\n"}]`,
		"unit in a subdirectory":    `[{"name":"sub/x.service","contents":"[Service]\nExecStart=/bin/true\n"}]`,
		"masked unit climbing out":  `[{"name":"../../x.service","mask":true}]`,
		"enabled unit with a slash": `[{"name":"a/../x.service","enabled":true}]`,
		"drop-in climbing out":      `[{"name":"ok.service","dropins":[{"name":"../../../../x.conf","contents":"[Service]\n"}]}]`,
		"drop-in in a subdirectory": `[{"name":"ok.service","dropins":[{"name":"a/b.conf","contents":"[Service]\n"}]}]`,
		"unit named only a suffix":  `[{"name":".service","enabled":true}]`,
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "a", "b", "root")
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			sd := newFake()
			cfg, _, err := Parse([]byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/first","contents":{"source":"data:,1"}}]},"systemd":{"units":` + units + `}}`))
			var plan *Plan
			if err == nil {
				plan, err = Compute(context.Background(), cfg, root, sd, now)
				if err == nil {
					err = plan.Apply(context.Background())
					t.Errorf("applied (%v)", err)
				}
			}
			if err == nil || !strings.Contains(err.Error(), "name") {
				t.Errorf("error %v does not say what is wrong with the name", err)
			}
			if got := readTree(t, base); len(got) != 3 || len(sd.calls) != 0 {
				t.Fatalf("the node changed: %v, systemd calls %v", got, sd.calls)
			}
		})
	}
}

// The unit directory is /etc/systemd/system inside the root, even when a symlink there points at
// a path that exists on this machine: units are written, and a unit file moved aside before a
// mask, inside the root.
func TestUnitFilesStayInsideTheRoot(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside-units")
	mkTree(t, base, tree{
		"/outside-units/locksmithd.service":   file(0o644, "[Service]\nExecStart=/host/only\n"),
		"/root/etc/systemd/system":            link(outside),
		"/root" + outside + "/placeholder.md": file(0o644, "in-root unit dir"),
	})
	sd := newFake()
	sd.file["locksmithd.service"], sd.active["locksmithd.service"] = "enabled", "inactive"
	cfg, _, err := Parse([]byte(`{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"locksmithd.service","mask":true},
		{"name":"app.service","contents":"[Service]\nExecStart=/bin/true\n","dropins":[{"name":"10-a.conf","contents":"[Service]\n"}]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Compute(ctx, cfg, root, sd, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	want := withParents(tree{
		"/outside-units/locksmithd.service":            file(0o644, "[Service]\nExecStart=/host/only\n"),
		"/root/etc/systemd/system":                     link(outside),
		"/root" + outside + "/placeholder.md":          file(0o644, "in-root unit dir"),
		"/root" + outside + "/app.service":             file(0o644, "[Service]\nExecStart=/bin/true\n"),
		"/root" + outside + "/app.service.d/10-a.conf": file(0o644, "[Service]\n"),
	})
	if d := diffTrees(readTree(t, base), want); d != "" {
		t.Fatalf("tree:\n%s\nplan:\n%s", d, plan)
	}
	if got, want := sd.calls, []string{"mask locksmithd.service", "reload"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("systemd calls %q, want %q", got, want)
	}
}

// mask: false unmasks a masked unit, as Ignition does; a unit that is not masked is left alone.
func TestMaskFalseUnmasks(t *testing.T) {
	sd := newFake()
	sd.file["a.service"], sd.file["b.service"] = "masked", "disabled"
	cfg, _, err := Parse([]byte(`{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"a.service","mask":false},{"name":"b.service","mask":false}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Compute(context.Background(), cfg, t.TempDir(), sd, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := sd.calls, []string{"unmask a.service", "reload"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("systemd calls %q, want %q", got, want)
	}
}
