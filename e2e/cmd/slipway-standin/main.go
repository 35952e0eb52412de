// Command slipway-standin runs the update_engine stand-in as a system service on the e2e node image,
// where Flatcar's update-engine.service would run: it owns com.coreos.update1 on the system bus and
// answers GetStatus, AttemptUpdate and ResetStatus, emitting StatusUpdate with Flatcar's signature.
// Like Flatcar it writes /run/reboot-required when an update is staged, and the staged version
// becomes the OS version (os-release) at the next boot.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/internal/sysbus"
	"github.com/slipway-dev/slipway/internal/testsupport/standin"
	"github.com/slipway-dev/slipway/internal/updateengine"
)

func main() {
	newVersion := flag.String("new-version", "9999.0.0", "the version AttemptUpdate brings")
	stateDir := flag.String("state-dir", "/var/lib/slipway-standin", "where the staged version waits for the next boot")
	osRelease := flag.String("os-release", "/etc/os-release", "os-release to update at boot when a version was staged")
	rebootRequired := flag.String("reboot-required-file", "/run/reboot-required", "written when an update is staged; empty disables")
	stepDelay := flag.Duration("step-delay", 500*time.Millisecond, "pause between the status steps of an update")
	confRoot := flag.String("update-conf-root", "/", "host root whose update.conf each AttemptUpdate over D-Bus reads, as update_engine does; empty: not read")
	offer := flag.String("offer", "", "what the update server offers per GROUP, group=version,... (other groups: --new-version)")
	flag.Parse()
	offers, err := parseOffers(*offer)
	if err != nil {
		fmt.Fprintln(os.Stderr, "slipway-standin: --offer:", err)
		os.Exit(2)
	}
	if err := run(*newVersion, *stateDir, *osRelease, *rebootRequired, *stepDelay, *confRoot, offers); err != nil {
		fmt.Fprintln(os.Stderr, "slipway-standin:", err)
		os.Exit(1)
	}
}

var versionLine = regexp.MustCompile(`(?m)^(VERSION|VERSION_ID)=.*$`)

// parseOffers reads group=version,...
func parseOffers(s string) (map[string]string, error) {
	offers := map[string]string{}
	if s == "" {
		return offers, nil
	}
	for _, kv := range strings.Split(s, ",") {
		g, v, ok := strings.Cut(kv, "=")
		if !ok || g == "" || v == "" {
			return nil, fmt.Errorf("%q: want group=version", kv)
		}
		offers[g] = v
	}
	return offers, nil
}

func run(newVersion, stateDir, osRelease, rebootRequired string, stepDelay time.Duration, confRoot string, offers map[string]string) error {
	staged := filepath.Join(stateDir, "staged-version")
	if v, err := os.ReadFile(staged); err == nil {
		// "Boot into the other partition": the staged version is now the running one.
		if b, err := os.ReadFile(osRelease); err == nil {
			out := versionLine.ReplaceAllString(string(b), "${1}="+string(v))
			if err := os.WriteFile(osRelease, []byte(out), 0o644); err != nil {
				return err
			}
		}
		_ = os.Remove(staged)
	}
	conn, err := sysbus.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	ue, err := standin.ServeUpdateEngine(conn, newVersion)
	if err != nil {
		return err
	}
	ue.StepDelay = stepDelay
	ue.ReadUpdateConf(confRoot, offers)
	ue.OnNeedReboot = func(version string) {
		_ = os.MkdirAll(stateDir, 0o755)
		_ = os.WriteFile(staged, []byte(version), 0o644)
		if rebootRequired != "" {
			_ = os.WriteFile(rebootRequired, nil, 0o644)
		}
	}
	fmt.Println("slipway-standin: update_engine stand-in owns", updateengine.BusName)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}
