package main

import (
	"flag"

	"github.com/slipway-dev/slipway/internal/fluoflags"
)

// fluoFlags is every flag FLUO v0.9.0's and v0.10's update-agent accepted (their -help: v0.9's own
// three, v0.10's -force-drain, and klog's), with a value FLUO accepted. -node, -version and klog's
// mean here what they meant there; -grace-period and -force-drain are accepted and ignored
// (fluoIgnored).
var fluoFlags = append([]fluoflags.Flag{
	{Name: "grace-period", Example: "600"},
	{Name: "force-drain", Example: "true"},
	{Name: "node", Example: "node-1"},
	{Name: "version", Example: "false"},
}, fluoflags.Klog...)

// fluoIgnored are FLUO's flags that mean nothing in Slipway's agent; each logs a warning when given.
var fluoIgnored = []fluoflags.Ignored{{
	Name: "grace-period",
	Why: "FLUO's agent drained its own node and gave each pod this many seconds to terminate; " +
		"Slipway's agent never drains: the operator evicts the pods before it grants reboot-ok " +
		"(update-operator --drain-grace-period)",
}, {
	Name: "force-drain",
	Why: "FLUO v0.10's agent then also deleted pods no controller manages when it drained its own node; " +
		"Slipway's agent never drains: set update-operator --force-drain for that",
}}

// addFLUOFlags defines FLUO's flags that Slipway's agent does not define for its own use.
func addFLUOFlags(fs *flag.FlagSet) {
	// An int, as in FLUO: a value FLUO refused is refused here too.
	fs.Int("grace-period", 600, "FLUO's; ignored: "+fluoIgnored[0].Why)
	fs.Bool("force-drain", false, "FLUO v0.10's; ignored: "+fluoIgnored[1].Why)
	fluoflags.AddKlog(fs)
}
