// Package fluoflags lets both binaries accept every flag FLUO v0.9.0's binaries accepted, so a FLUO
// manifest never crash-loops on "flag provided but not defined". FLUO registered klog's flags on its
// command line (klog.InitFlags(nil)); AddKlog gives Slipway's flag sets the same ones with klog's own
// meaning. A FLUO flag that means nothing in Slipway is an Ignored flag: accepted, and warned about at
// start by Warnings. Each binary lists FLUO's flags beside its own (fluo.go in its cmd package).
package fluoflags

import (
	"flag"
	"fmt"
	"strings"

	"k8s.io/klog/v2"
)

// Flag is one flag of a FLUO binary and a value FLUO accepted for it (for tests and examples).
type Flag struct {
	Name, Example string
}

// Klog is what klog v2.60.1's InitFlags registered (FLUO v0.9.0's go.mod), i.e. the klog part of
// `update-operator -help` and `update-agent -help` of FLUO v0.9.0. The klog Slipway links registers
// the same names with the same meaning (plus newer ones Slipway does not expose).
var Klog = []Flag{
	{"add_dir_header", "false"},
	{"alsologtostderr", "false"},
	{"log_backtrace_at", "controller.go:100"},
	{"log_dir", "/var/log/update"},
	{"log_file", "/var/log/update/update.log"},
	{"log_file_max_size", "1800"},
	{"logtostderr", "true"},
	{"one_output", "false"},
	{"skip_headers", "false"},
	{"skip_log_headers", "false"},
	{"stderrthreshold", "ERROR"},
	{"v", "2"},
	{"vmodule", "operator=4"},
}

// AddKlog defines on fs each of Klog's flags bound to klog's own settings, so -logtostderr=false
// -log_file=F logs to F as it did in FLUO. Names fs already defines (-v, with Slipway's help text,
// bound to the same klog setting) are left alone.
func AddKlog(fs *flag.FlagSet) {
	k := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(k)
	for _, f := range Klog {
		// A name klog no longer had would stay undefined, and each binary's test of FLUO's flags fail.
		if kf := k.Lookup(f.Name); kf != nil && fs.Lookup(f.Name) == nil {
			// Newer klog's -legacy_stderr_threshold_behavior is not exposed: it stays true, FLUO's behaviour.
			usage := strings.Replace(kf.Usage, " unless -legacy_stderr_threshold_behavior=false", "", 1)
			fs.Var(kf.Value, f.Name, "klog, as in FLUO: "+usage)
		}
	}
}

// Ignored is a FLUO flag that Slipway accepts and ignores, and why.
type Ignored struct {
	Name, Why string
}

// Warning is what the binary logs at start when an ignored flag was given.
func (i Ignored) Warning() string {
	return fmt.Sprintf("flag -%s is FLUO's and has no effect in Slipway: %s", i.Name, i.Why)
}

// Warnings returns the warning of each ignored flag that was set on fs, from the command line or
// the environment (flagenv sets flags through fs.Set, which counts as set).
func Warnings(fs *flag.FlagSet, ignored []Ignored) []string {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var out []string
	for _, i := range ignored {
		if set[i.Name] {
			out = append(out, i.Warning())
		}
	}
	return out
}

// Undefined returns the names in fluo that fs does not define.
func Undefined(fs *flag.FlagSet, fluo []Flag) []string {
	var missing []string
	for _, f := range fluo {
		if fs.Lookup(f.Name) == nil {
			missing = append(missing, f.Name)
		}
	}
	return missing
}
