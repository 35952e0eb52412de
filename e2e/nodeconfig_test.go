package e2e

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// `update-agent node-config apply` against a real systemd (the VM's PID 1, over its system bus):
// the harness already converted every node at boot; here a node on another channel and a private
// update server drifts back (locksmithd unmasked and running, update-engine disabled and stopped)
// and is brought in line again, keeping its GROUP and SERVER; then unit files, drop-ins, unmasking
// and refused unit names meet the real systemd.
func TestNodeConfigOnRealSystemd(t *testing.T) {
	f := features.New("existing fleet: node-config apply").
		Assess("converted at boot, drift shown by --dry-run, fixed by apply keeping GROUP and SERVER, idempotent; units on the real systemd", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			skipIfNeeded(t)
			if cluster == nil {
				t.Skip("needs a shell in the node (local provider)")
			}
			snippet := slipwaySnippet(t)
			vm := cluster.VMs[0]
			sh := nodeShell(ctx, t, vm)
			// Whatever fails below, the node ends in line for the scenarios after this one.
			defer putBackInLine(t, vm)
			applyConfig := func(config []byte, args ...string) string {
				t.Helper()
				out, err := vm.ExecInput(ctx, config, cluster.AgentPath, append([]string{"node-config", "apply", "--config", "-"}, args...)...)
				if err != nil {
					t.Fatalf("node-config apply %v: %v", args, err)
				}
				return out
			}
			apply := func(args ...string) string { t.Helper(); return applyConfig(snippet, args...) }
			states := func() string { return unitStates(sh) }

			// 1. The conversion at boot took: what systemctl itself says; update.conf was not touched.
			if got := states(); got != "masked inactive enabled active" {
				t.Fatalf("after the harness's conversion: locksmithd/update-engine = %q", got)
			}
			if got := sh("ls /etc/flatcar/ | grep -c slipway-backup || true"); got != "0" {
				t.Fatalf("the conversion replaced something in /etc/flatcar (%s backups)", got)
			}
			if cluster.FlatcarImage == "" { // the image's unconverted update.conf, as the node had it
				if got := sh("cat /etc/flatcar/update.conf"); got != "GROUP=stable" {
					t.Fatalf("update.conf = %q", got)
				}
			}
			if out := apply(); !strings.Contains(out, "nothing to do") {
				t.Fatalf("a converted node is not in line:\n%s", out)
			}

			// 2. A beta node on a private update server drifts: someone brings locksmithd back with
			// a customized copy of its unit in /etc/systemd/system (which systemd refuses to mask in
			// place) and stops update-engine.
			const nodeConf = "GROUP=beta\nSERVER=https://nebraska.internal.example/v1/update/\nREBOOT_STRATEGY=reboot"
			origConf := sh("cat /etc/flatcar/update.conf 2>/dev/null || true")
			defer func() {
				if _, err := vm.Exec(context.Background(), "/bin/sh", "-c", "printf '%s\\n' '"+origConf+"' > /etc/flatcar/update.conf"); err != nil {
					t.Errorf("restoring update.conf on %s: %v", vm.Name, err)
				}
			}()
			sh("printf '" + nodeConf + "\\n' > /etc/flatcar/update.conf && " +
				"systemctl unmask locksmithd.service && (cat /usr/lib/systemd/system/locksmithd.service; echo '# customized by an admin') > /etc/systemd/system/locksmithd.service && " +
				"systemctl daemon-reload && systemctl enable --now locksmithd.service && systemctl disable --now update-engine.service")
			confSum := sh("sha256sum /etc/flatcar/update.conf")
			if got := states(); got != "enabled active disabled inactive" {
				t.Fatalf("drift not in place: %q", got)
			}
			dry := apply("--dry-run")
			for _, want := range []string{"stop locksmithd.service", "move /etc/systemd/system/locksmithd.service aside", "mask locksmithd.service", "enable update-engine.service", "start update-engine.service", "dry run: nothing changed"} {
				if !strings.Contains(dry, want) {
					t.Errorf("--dry-run output lacks %q:\n%s", want, dry)
				}
			}
			if strings.Contains(dry, "update.conf") {
				t.Errorf("the plan touches update.conf:\n%s", dry)
			}
			if got := states(); got != "enabled active disabled inactive" {
				t.Fatalf("--dry-run changed units: %q", got)
			}

			// 3. Apply brings it back, keeps the customized unit, leaves update.conf — GROUP=beta and
			// the private SERVER — byte for byte; a second apply does nothing.
			t.Logf("apply:\n%s", apply())
			if got := states(); got != "masked inactive enabled active" {
				t.Fatalf("after apply: %q", got)
			}
			if got := sh("sha256sum /etc/flatcar/update.conf"); got != confSum {
				t.Fatalf("update.conf changed: %q", sh("cat /etc/flatcar/update.conf"))
			}
			if got := sh("grep -E '^(GROUP|SERVER)=' /etc/flatcar/update.conf"); got != "GROUP=beta\nSERVER=https://nebraska.internal.example/v1/update/" {
				t.Fatalf("GROUP/SERVER after apply: %q", got)
			}
			if got := sh("grep -l 'customized by an admin' /etc/systemd/system/locksmithd.service.slipway-backup-* | wc -l"); got != "1" {
				t.Fatalf("the customized locksmithd unit was not kept (%s backups hold it)", got)
			}
			if out := apply(); !strings.Contains(out, "nothing to do") {
				t.Fatalf("second apply not idempotent:\n%s", out)
			}

			// 4. Configs it will not apply change nothing: users belong to first boot; unit and
			// drop-in names must be plain file names (Ignition checks only their suffix).
			for name, bad := range map[string]string{
				"users":                        `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core"}]},"systemd":{"units":[{"name":"update-engine.service","mask":true}]}}`,
				"unit out of /etc":             `{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"update-engine.service","mask":true},{"name":"../../../tmp/slipway-escape.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n"}]}}`,
				"drop-in out of its directory": `{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"update-engine.service","mask":true,"dropins":[{"name":"../../../../tmp/slipway-escape.conf","contents":"[Service]\n"}]}]}}`,
			} {
				if out, err := vm.ExecInput(ctx, []byte(bad), cluster.AgentPath, "node-config", "apply", "--config", "-"); err == nil || !strings.Contains(err.Error(), "nothing applied") {
					t.Fatalf("%s: bad config accepted: %v\n%s", name, err, out)
				}
			}
			if got := states(); got != "masked inactive enabled active" {
				t.Fatalf("a refused config changed units: %q", got)
			}
			if got := sh("ls /tmp/slipway-escape.* /etc/systemd/slipway-escape.* 2>/dev/null | wc -l"); got != "0" {
				t.Fatalf("a refused unit name wrote %s file(s)", got)
			}

			// 5. A unit with contents and a drop-in, enabled: written, loaded with the drop-in,
			// enabled and started by the real systemd; then in line.
			probe := []byte(`{"ignition":{"version":"3.0.0"},"systemd":{"units":[{"name":"slipway-e2e-probe.service","enabled":true,
				"contents":"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
				"dropins":[{"name":"10-env.conf","contents":"[Service]\nEnvironment=SLIPWAY_PROBE=1\n"}]}]}}`)
			defer func() {
				if _, err := vm.Exec(context.Background(), "/bin/sh", "-c", "systemctl disable --now slipway-e2e-probe.service; rm -rf /etc/systemd/system/slipway-e2e-probe.service* ; systemctl daemon-reload"); err != nil {
					t.Errorf("removing the probe unit on %s: %v", vm.Name, err)
				}
			}()
			t.Logf("probe unit:\n%s", applyConfig(probe))
			if got := sh("echo $(systemctl is-enabled slipway-e2e-probe.service) $(systemctl is-active slipway-e2e-probe.service) $(systemctl show -p Environment --value slipway-e2e-probe.service)"); got != "enabled active SLIPWAY_PROBE=1" {
				t.Fatalf("probe unit: %q", got)
			}
			if out := applyConfig(probe); !strings.Contains(out, "nothing to do") {
				t.Fatalf("probe unit not in line after apply:\n%s", out)
			}

			// 6. mask: false unmasks (as Ignition does); the snippet masks it again.
			unmask := []byte(`{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"locksmithd.service","mask":false}]}}`)
			if out := applyConfig(unmask); !strings.Contains(out, "unmask locksmithd.service") {
				t.Fatalf("mask: false did not unmask:\n%s", out)
			}
			if got := sh("systemctl is-enabled locksmithd.service || true"); got == "masked" {
				t.Fatalf("locksmithd still masked after mask: false")
			}
			if out := applyConfig(unmask); !strings.Contains(out, "nothing to do") {
				t.Fatalf("unmask not in line after apply:\n%s", out)
			}
			apply()
			if got := states(); got != "masked inactive enabled active" {
				t.Fatalf("after masking again: %q", got)
			}
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
