package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/slipway-dev/slipway/e2e/harness"
	"github.com/slipway-dev/slipway/internal/testenv"
)

// `update-agent node-config apply` against a real systemd (the VM's PID 1, over its system bus):
// the harness already converted every node at boot; here a node drifts back (locksmithd unmasked and
// running, update-engine disabled and stopped, update.conf edited) and is brought in line again.
func TestNodeConfigOnRealSystemd(t *testing.T) {
	f := features.New("existing fleet: node-config apply").
		Assess("converted at boot, drift shown by --dry-run, fixed by apply, idempotent", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			skipIfNeeded(t)
			if cluster == nil {
				t.Skip("needs a shell in the node (local provider)")
			}
			root, err := testenv.RepoRoot()
			if err != nil {
				t.Fatal(err)
			}
			snippet, err := os.ReadFile(harness.SlipwaySnippet(root))
			if err != nil {
				t.Fatal(err)
			}
			vm := cluster.VMs[0]
			sh := func(script string) string {
				t.Helper()
				out, err := vm.Exec(ctx, "/bin/sh", "-c", script)
				if err != nil {
					t.Fatalf("%s on %s: %v", script, vm.Name, err)
				}
				return strings.TrimSpace(out)
			}
			apply := func(args ...string) string {
				t.Helper()
				out, err := vm.ExecInput(ctx, snippet, cluster.AgentPath, append([]string{"node-config", "apply", "--config", "-"}, args...)...)
				if err != nil {
					t.Fatalf("node-config apply %v: %v", args, err)
				}
				return out
			}
			states := func() string {
				return sh("echo $(systemctl is-enabled locksmithd.service) $(systemctl is-active locksmithd.service) $(systemctl is-enabled update-engine.service) $(systemctl is-active update-engine.service)")
			}
			conf := "GROUP=stable\nSERVER=https://public.update.flatcar-linux.net/v1/update/\nREBOOT_STRATEGY=off"

			// 1. The conversion at boot took: what systemctl itself says.
			if got := states(); got != "masked inactive enabled active" {
				t.Fatalf("after the harness's conversion: locksmithd/update-engine = %q", got)
			}
			if got := sh("cat /etc/flatcar/update.conf"); got != conf {
				t.Fatalf("update.conf = %q", got)
			}
			if cluster.FlatcarImage == "" { // Flatcar nodes got the snippet from Ignition: nothing to keep
				if got := sh("cat /etc/flatcar/update.conf.slipway-backup-*"); got != "GROUP=stable" {
					t.Fatalf("the node's own update.conf was not kept: %q", got)
				}
			}
			if out := apply(); !strings.Contains(out, "nothing to do") {
				t.Fatalf("a converted node is not in line:\n%s", out)
			}

			// 2. Drift: someone brings locksmithd back with a customized copy of its unit in
			// /etc/systemd/system (which systemd refuses to mask in place), stops update-engine and
			// edits update.conf.
			sh("systemctl unmask locksmithd.service && (cat /usr/lib/systemd/system/locksmithd.service; echo '# customized by an admin') > /etc/systemd/system/locksmithd.service && " +
				"systemctl daemon-reload && systemctl enable --now locksmithd.service && systemctl disable --now update-engine.service && echo REBOOT_STRATEGY=reboot > /etc/flatcar/update.conf")
			if got := states(); got != "enabled active disabled inactive" {
				t.Fatalf("drift not in place: %q", got)
			}
			dry := apply("--dry-run")
			for _, want := range []string{"stop locksmithd.service", "move /etc/systemd/system/locksmithd.service aside", "mask locksmithd.service", "enable update-engine.service", "start update-engine.service", "-REBOOT_STRATEGY=reboot", "+REBOOT_STRATEGY=off", "dry run: nothing changed"} {
				if !strings.Contains(dry, want) {
					t.Errorf("--dry-run output lacks %q:\n%s", want, dry)
				}
			}
			if got := states(); got != "enabled active disabled inactive" {
				t.Fatalf("--dry-run changed units: %q", got)
			}
			if got := sh("cat /etc/flatcar/update.conf"); got != "REBOOT_STRATEGY=reboot" {
				t.Fatalf("--dry-run changed update.conf: %q", got)
			}

			// 3. Apply brings it back, keeps the drifted file, and a second apply does nothing.
			t.Logf("apply:\n%s", apply())
			if got := states(); got != "masked inactive enabled active" {
				t.Fatalf("after apply: %q", got)
			}
			if got := sh("cat /etc/flatcar/update.conf"); got != conf {
				t.Fatalf("update.conf after apply = %q", got)
			}
			if got := sh("grep -l REBOOT_STRATEGY=reboot /etc/flatcar/update.conf.slipway-backup-* | wc -l"); got != "1" {
				t.Fatalf("drifted update.conf not kept (%s backups hold it)", got)
			}
			if got := sh("grep -l 'customized by an admin' /etc/systemd/system/locksmithd.service.slipway-backup-* | wc -l"); got != "1" {
				t.Fatalf("the customized locksmithd unit was not kept (%s backups hold it)", got)
			}
			if out := apply(); !strings.Contains(out, "nothing to do") {
				t.Fatalf("second apply not idempotent:\n%s", out)
			}

			// 4. A config it will not apply (users belong to first boot) changes nothing.
			bad := `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core"}]},"systemd":{"units":[{"name":"update-engine.service","mask":true}]}}`
			if out, err := vm.ExecInput(ctx, []byte(bad), cluster.AgentPath, "node-config", "apply", "--config", "-"); err == nil || !strings.Contains(err.Error(), "passwd users") {
				t.Fatalf("bad config accepted: %v\n%s", err, out)
			}
			if got := states(); got != "masked inactive enabled active" {
				t.Fatalf("a refused config changed units: %q", got)
			}
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
