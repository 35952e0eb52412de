package butane

import (
	"bytes"
	"os"
	"strings"
	"testing"

	ign3 "github.com/coreos/ignition/v2/config/v3_4"
	ign3types "github.com/coreos/ignition/v2/config/v3_4/types"
	ign2 "github.com/flatcar/ignition/config/v2_3"
	"github.com/vincent-petithory/dataurl"
)

// Every committed .ign is what its snippet translates to now.
func TestGeneratedFilesAreFresh(t *testing.T) {
	srcs, err := Snippets("snippets")
	if err != nil || len(srcs) != 4 {
		t.Fatalf("snippets: %v %v", srcs, err)
	}
	for _, src := range srcs {
		want, err := Translate(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(Output(src))
		if err != nil {
			t.Fatalf("%s: %v (run make butane)", Output(src), err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make butane", Output(src))
		}
	}
}

func decode(t *testing.T, source *string) string {
	t.Helper()
	if source == nil {
		t.Fatal("file without contents")
	}
	d, err := dataurl.DecodeString(*source)
	if err != nil {
		t.Fatal(err)
	}
	return string(d.Data)
}

func parse3(t *testing.T, path string) ign3types.Config {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, r, err := ign3.Parse(raw)
	if err != nil || len(r.Entries) > 0 {
		t.Fatalf("%s does not validate as Ignition 3.4: %v %s", path, err, r)
	}
	return cfg
}

// The Flatcar snippet for every node, read back with Ignition's own 3.4 parser: locksmithd masked,
// update-engine enabled, and nothing else — applied to a running node it must not touch what the
// node's update_engine reads (GROUP, SERVER in /etc/flatcar/update.conf), or anything else.
func TestFlatcarSnippet(t *testing.T) {
	cfg := parse3(t, "snippets/flatcar-slipway.ign")
	units := map[string]ign3types.Unit{}
	for _, u := range cfg.Systemd.Units {
		units[u.Name] = u
	}
	if u := units["locksmithd.service"]; u.Mask == nil || !*u.Mask {
		t.Error("locksmithd is not masked")
	}
	if u := units["update-engine.service"]; u.Enabled == nil || !*u.Enabled {
		t.Error("update-engine is not enabled")
	}
	if len(units) != 2 || len(cfg.Storage.Files) != 0 || len(cfg.Storage.Directories) != 0 || len(cfg.Storage.Links) != 0 {
		t.Errorf("the every-node snippet does more than mask locksmithd and enable update-engine: units %v, storage %+v", units, cfg.Storage)
	}
}

// The new-node snippet writes update.conf with REBOOT_STRATEGY=off and leaves GROUP and SERVER to
// the image, so that a beta image stays on beta; its marker line lets a RebootPolicy's spec.update set
// them (the main module's updateconf.Marker; this module does not import it, so it is spelled here).
func TestFlatcarNewNodeSnippet(t *testing.T) {
	cfg := parse3(t, "snippets/flatcar-new-node.ign")
	if len(cfg.Storage.Files) != 1 || cfg.Storage.Files[0].Path != "/etc/flatcar/update.conf" || len(cfg.Systemd.Units) != 0 {
		t.Fatalf("files %+v, units %+v", cfg.Storage.Files, cfg.Systemd.Units)
	}
	f := cfg.Storage.Files[0]
	if conf := decode(t, f.Contents.Source); conf != "# managed-by: slipway (GROUP and SERVER follow the node's RebootPolicy)\nREBOOT_STRATEGY=off\n" {
		t.Errorf("update.conf = %q", conf)
	}
	if f.Overwrite == nil || !*f.Overwrite {
		t.Error("update.conf must overwrite one the image or an installer left")
	}
}

// The CLC snippet for Flatcar < 3185, read back with flatcar/ignition's spec 2.3 parser.
func TestCLCSnippet(t *testing.T) {
	raw, err := os.ReadFile("snippets/flatcar-slipway.clc.ign")
	if err != nil {
		t.Fatal(err)
	}
	cfg, r, err := ign2.Parse(raw)
	if err != nil {
		t.Fatalf("does not validate as Ignition 2.3: %v %s", err, r)
	}
	for _, e := range r.Entries {
		// ct writes ignition.security.tls, which the 2.3 parser does not know: harmless.
		if !strings.Contains(e.Message, "tls") {
			t.Errorf("validation: %s", e)
		}
	}
	masked, enabled := false, false
	for _, u := range cfg.Systemd.Units {
		masked = masked || (u.Name == "locksmithd.service" && u.Mask)
		enabled = enabled || (u.Name == "update-engine.service" && u.Enabled != nil && *u.Enabled)
	}
	if !masked || !enabled {
		t.Errorf("locksmithd masked %v, update-engine enabled %v", masked, enabled)
	}
	found := false
	for _, f := range cfg.Storage.Files {
		if f.Path == "/etc/coreos/update.conf" {
			found = true
			src := f.Contents.Source
			conf := decode(t, &src)
			if !strings.Contains(conf, `REBOOT_STRATEGY="off"`) || strings.Contains(conf, "GROUP") || strings.Contains(conf, "SERVER") {
				t.Errorf("update.conf:\n%s", conf)
			}
		}
	}
	if !found {
		t.Error("no /etc/coreos/update.conf")
	}
}

// The Fedora CoreOS snippet: Zincati's strategy is fleet_lock at the per-node server on loopback
// (deploy/fleetlock/ listens there; deploy/deploy_test.go checks the two agree).
func TestFCOSSnippet(t *testing.T) {
	cfg := parse3(t, "snippets/fcos-fleetlock.ign")
	if len(cfg.Storage.Files) != 1 || !strings.HasPrefix(cfg.Storage.Files[0].Path, "/etc/zincati/config.d/") {
		t.Fatalf("files: %+v", cfg.Storage.Files)
	}
	conf := decode(t, cfg.Storage.Files[0].Contents.Source)
	for _, want := range []string{`strategy = "fleet_lock"`, `[updates.fleet_lock]`, `base_url = "http://127.0.0.1:495/"`} {
		if !strings.Contains(conf, want) {
			t.Errorf("zincati config lacks %q:\n%s", want, conf)
		}
	}
}

// Bad input: a snippet that is not valid Butane is an error, not a half-written file.
func TestTranslateErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"bad.bu":       "variant: flatcar\nversion: 1.1.0\nsystemd: [oops",
		"unknown.bu":   "variant: flatcar\nversion: 1.1.0\nsystemd:\n  unitz: []\n",
		"bad.clc.yaml": "systemd: [oops",
		"note.txt":     "hello",
	} {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Translate(p); err == nil {
			t.Errorf("%s translated without error", name)
		}
	}
}
