package nodeconfig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeSystemd is a unit table; it records every call so tests can assert what was (not) done.
type fakeSystemd struct {
	file, active map[string]string
	calls        []string
	failStart    string
}

func newFake() *fakeSystemd {
	return &fakeSystemd{file: map[string]string{}, active: map[string]string{}}
}

func (f *fakeSystemd) UnitState(_ context.Context, n string) (UnitState, error) {
	a := f.active[n]
	if a == "" {
		a = "inactive"
	}
	return UnitState{File: f.file[n], Active: a}, nil
}
func (f *fakeSystemd) rec(c string)                 { f.calls = append(f.calls, c) }
func (f *fakeSystemd) Reload(context.Context) error { f.rec("reload"); return nil }
func (f *fakeSystemd) Mask(_ context.Context, n string) error {
	f.rec("mask " + n)
	f.file[n] = "masked"
	return nil
}
func (f *fakeSystemd) Unmask(_ context.Context, n string) error {
	f.rec("unmask " + n)
	f.file[n] = "disabled"
	return nil
}
func (f *fakeSystemd) Enable(_ context.Context, n string) error {
	f.rec("enable " + n)
	f.file[n] = "enabled"
	return nil
}
func (f *fakeSystemd) Disable(_ context.Context, n string) error {
	f.rec("disable " + n)
	f.file[n] = "disabled"
	return nil
}
func (f *fakeSystemd) Start(_ context.Context, n string) error {
	f.rec("start " + n)
	if n == f.failStart {
		return fmt.Errorf("job failed")
	}
	f.active[n] = "active"
	return nil
}
func (f *fakeSystemd) Stop(_ context.Context, n string) error {
	f.rec("stop " + n)
	f.active[n] = "inactive"
	return nil
}

var now = time.Date(2026, 11, 21, 16, 30, 0, 0, time.UTC)

// The committed snippet users apply: butane/snippets/flatcar-slipway.ign.
func slipwaySnippet(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../butane/snippets/flatcar-slipway.ign")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func summaries(p *Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, strings.Fields(s.Summary)[0]+" "+strings.Fields(s.Summary)[1])
	}
	return out
}

// A beta node on a private update server, converted with Slipway's snippet: locksmithd stopped and
// masked, update-engine enabled and started — and its update.conf, GROUP and SERVER included,
// exactly as it was (the snippet used to replace it with GROUP=stable and the public SERVER).
func TestSnippetOnAnUnconvertedFlatcarNode(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	conf := filepath.Join(root, "etc/flatcar/update.conf")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	userConf := "GROUP=beta\nSERVER=https://nebraska.example/v1/update/\nREBOOT_STRATEGY=reboot\n"
	if err := os.WriteFile(conf, []byte(userConf), 0o600); err != nil {
		t.Fatal(err)
	}
	before := readTree(t, root)
	sd := newFake()
	sd.file["locksmithd.service"], sd.active["locksmithd.service"] = "enabled", "active"
	sd.file["update-engine.service"], sd.active["update-engine.service"] = "disabled", "inactive"

	cfg, _, err := Parse(slipwaySnippet(t))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Compute(ctx, cfg, root, sd, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"stop locksmithd.service", "mask locksmithd.service", "enable update-engine.service", "reload systemd", "start update-engine.service"}
	if got := summaries(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan = %q, want %q\n%s", got, want, plan)
	}
	if len(sd.calls) != 0 {
		t.Fatalf("Compute changed the node: calls %v", sd.calls)
	}
	if err := plan.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := sd.calls, []string{"stop locksmithd.service", "mask locksmithd.service", "enable update-engine.service", "reload", "start update-engine.service"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("systemd calls = %q, want %q", got, want)
	}
	if d := diffTrees(readTree(t, root), before); d != "" {
		t.Fatalf("the node's files changed (update.conf must stay the node's):\n%s", d)
	}

	// Idempotent: a second run finds nothing to do and calls nothing that changes state.
	again, err := Compute(ctx, cfg, root, sd, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Steps) != 0 || !strings.Contains(again.String(), "nothing to do") {
		t.Fatalf("second run planned %q", summaries(again))
	}
}

func TestMaskedButRunningIsStopped(t *testing.T) {
	ctx := context.Background()
	sd := newFake()
	sd.file["locksmithd.service"], sd.active["locksmithd.service"] = "masked", "active"
	sd.file["update-engine.service"], sd.active["update-engine.service"] = "enabled", "active"
	cfg, _, _ := Parse(slipwaySnippet(t))
	plan, err := Compute(ctx, cfg, t.TempDir(), sd, now)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summaries(plan), []string{"stop locksmithd.service"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("plan = %q, want %q", got, want)
	}
}

func TestUnitContentsAreWrittenReloadedEnabledStarted(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cfg, _, err := Parse([]byte(`{"ignition":{"version":"3.4.0"},"systemd":{"units":[
		{"name":"slipway-test.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
		 "dropins":[{"name":"10-env.conf","contents":"[Service]\nEnvironment=A=1\n"}]},
		{"name":"old.service","enabled":false}]},
		"storage":{"directories":[{"path":"/var/lib/slipway","mode":448}],"links":[{"path":"/etc/slipway/current","target":"/var/lib/slipway"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	sd := newFake()
	sd.file["old.service"], sd.active["old.service"] = "enabled", "active"
	plan, err := Compute(ctx, cfg, root, sd, now)
	if err != nil {
		t.Fatal(err)
	}
	// Drop-ins before their unit, as Ignition writes them.
	want := []string{"create directory", "link /etc/slipway/current", "write /etc/systemd/system/slipway-test.service.d/10-env.conf", "write /etc/systemd/system/slipway-test.service",
		"enable slipway-test.service", "stop old.service", "disable old.service", "reload systemd", "start slipway-test.service"}
	if got := summaries(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan = %q\nwant  %q", got, want)
	}
	if err := plan.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(root, "var/lib/slipway")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v %v", st, err)
	}
	if target, _ := os.Readlink(filepath.Join(root, "etc/slipway/current")); target != "/var/lib/slipway" {
		t.Fatalf("link -> %q", target)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/slipway-test.service.d/10-env.conf")); !strings.Contains(string(b), "A=1") {
		t.Fatalf("dropin %q", b)
	}
	again, _ := Compute(ctx, cfg, root, sd, now)
	if len(again.Steps) != 0 {
		t.Fatalf("second run planned %q", summaries(again))
	}
}

// A locksmithd.service the admin put in /etc/systemd/system cannot be masked in place (systemd says
// "File ... already exists"; seen on the e2e VM): it is moved aside, kept, then masked.
func TestUnitFileInEtcIsMovedAsideThenMasked(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	unit := filepath.Join(root, "etc/systemd/system/locksmithd.service")
	_ = os.MkdirAll(filepath.Dir(unit), 0o755)
	if err := os.WriteFile(unit, []byte("[Service]\nExecStart=/usr/lib/locksmith/locksmithd --custom\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sd := newFake()
	sd.file["locksmithd.service"], sd.active["locksmithd.service"] = "enabled", "active"
	sd.file["update-engine.service"], sd.active["update-engine.service"] = "enabled", "active"
	cfg, _, _ := Parse(slipwaySnippet(t))
	plan, err := Compute(ctx, cfg, root, sd, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"stop locksmithd.service", "move /etc/systemd/system/locksmithd.service", "mask locksmithd.service", "reload systemd"}
	if got := summaries(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan = %q, want %q", got, want)
	}
	if err := plan.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(unit); err == nil {
		t.Fatal("the unit file is still in the way of the mask")
	}
	if b, err := os.ReadFile(unit + ".slipway-backup-20261121T163000Z"); err != nil || !strings.Contains(string(b), "--custom") {
		t.Fatalf("the admin's unit file was lost: %q %v", b, err)
	}
}

func TestFailedStepSaysWhich(t *testing.T) {
	root := t.TempDir()
	sd := newFake()
	sd.failStart = "update-engine.service"
	cfg, _, _ := Parse(slipwaySnippet(t))
	plan, err := Compute(context.Background(), cfg, root, sd, now)
	if err != nil {
		t.Fatal(err)
	}
	err = plan.Apply(context.Background())
	if err == nil || !strings.Contains(err.Error(), "start update-engine.service") {
		t.Fatalf("error %v does not name the failed step", err)
	}
}

// Bad input: a clear error, and the node is untouched (Compute never ran any step).
func TestBadConfigsChangeNothing(t *testing.T) {
	cases := map[string]struct{ cfg, want string }{
		"not json":        {`GROUP=stable`, "not a valid Ignition config"},
		"spec 2":          {`{"ignition":{"version":"2.3.0"}}`, "not a valid Ignition config"},
		"unknown version": {`{"ignition":{"version":"9.0.0"}}`, "not a valid Ignition config"},
		"bad unit":        {`{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"noext","enabled":true}]}}`, "not a valid Ignition config"},
		"users":           {`{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core"}]}}`, "passwd users"},
		"merge":           {`{"ignition":{"version":"3.4.0","config":{"merge":[{"source":"https://example.com/x.ign"}]}}}`, "merge/replace"},
		"disks":           {`{"ignition":{"version":"3.4.0"},"storage":{"disks":[{"device":"/dev/vdb"}]}}`, "disks"},
		"remote contents": {`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"https://example.com/x"}}]}}`, "only inline"},
		"bad hash":        {`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,hello","verification":{"hash":"sha512-a4abd4448c49562d828115d13a1fccea927f52b4d5459297f8b43e42da89238bc13626e43dcb38ddb082488927ec904fb42057443983e88585179d50551afe62"}}}]}}`, "hash mismatch"},
		"no overwrite":    {`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/flatcar/update.conf","contents":{"source":"data:,GROUP%3Dx"}}]}}`, "does not say overwrite"},
		"dir is a file":   {`{"ignition":{"version":"3.4.0"},"storage":{"directories":[{"path":"/etc/flatcar/update.conf"}]}}`, "not a directory"},
		"file is a dir":   {`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/flatcar","contents":{"source":"data:,x"}}]}}`, "/etc/flatcar"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			conf := filepath.Join(root, "etc/flatcar/update.conf")
			_ = os.MkdirAll(filepath.Dir(conf), 0o755)
			_ = os.WriteFile(conf, []byte("GROUP=mine\n"), 0o644)
			sd := newFake()
			var err error
			cfg, _, err := Parse([]byte(c.cfg))
			if err == nil {
				_, err = Compute(context.Background(), cfg, root, sd, now)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to mention %q", err, c.want)
			}
			if b, _ := os.ReadFile(conf); string(b) != "GROUP=mine\n" || len(sd.calls) != 0 {
				t.Fatalf("node changed: %q, %v", b, sd.calls)
			}
			entries, _ := os.ReadDir(filepath.Dir(conf))
			if len(entries) != 1 {
				t.Fatalf("files appeared: %v", entries)
			}
		})
	}
}
