package main

import "github.com/slipway-dev/slipway/internal/fluoflags"

// fluoFlags is every flag FLUO v0.9.0's update-operator accepted (its -help: its own six and
// klog's), with a value FLUO accepted. Each means here what it meant there: the window and hook
// flags take FLUO's syntax, -kubeconfig and -version are the same, klog's are klog's.
var fluoFlags = append([]fluoflags.Flag{
	{Name: "after-reboot-annotations", Example: "example.com/after-check"},
	{Name: "before-reboot-annotations", Example: "example.com/before-check,example.com/backup-done"},
	{Name: "kubeconfig", Example: "/etc/kubernetes/kubeconfig"},
	{Name: "reboot-window-length", Example: "1h30m"},
	{Name: "reboot-window-start", Example: "Mon 14:00"},
	{Name: "version", Example: "false"},
}, fluoflags.Klog...)

// fluoIgnored are FLUO's operator flags that mean nothing in Slipway: none today. One added here
// must also be defined by parse; run logs its warning when it is given.
var fluoIgnored []fluoflags.Ignored
