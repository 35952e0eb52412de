package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/flagenv"
)

func TestFlagsValid(t *testing.T) {
	t.Setenv("UPDATE_OPERATOR_REBOOT_WINDOW_START", "Thu 14:00")
	t.Setenv("UPDATE_OPERATOR_REBOOT_WINDOW_LENGTH", "1h")
	t.Setenv("UPDATE_OPERATOR_MAX_UNAVAILABLE", "5") // the command line wins over this
	o, _, err := parse([]string{"--namespace=ns", "--max-unavailable=25%", "--before-reboot-annotations=a/x,a/y", "--before-reboot-annotations=a/z", "--reboot-window-timezone=Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.MaxUnavailable.String(); got != "25%" {
		t.Errorf("max-unavailable = %s, want the command line's 25%%", got)
	}
	if got := strings.Join(cfg.Hooks.Before, " "); got != "a/x a/y a/z" {
		t.Errorf("before hooks = %q", got)
	}
	if cfg.Window == nil || !strings.Contains(cfg.Window.String(), "Thu 14:00 for 1h0m0s (Europe/Berlin)") {
		t.Errorf("window from the environment = %v", cfg.Window)
	}
	if cfg.Drain.Timeout != 10*time.Minute || cfg.Drain.Policy != "retry" {
		t.Errorf("drain defaults: %+v", cfg.Drain)
	}
}

func TestFlagsRejected(t *testing.T) {
	cases := map[string][]string{
		"zero budget":            {"--max-unavailable=0"},
		"budget not a number":    {"--max-unavailable=lots"},
		"window hour":            {"--reboot-window-start=25:00", "--reboot-window-length=1h"},
		"window without length":  {"--reboot-window-start=14:00"},
		"unknown time zone":      {"--reboot-window-timezone=Mars/Olympus"},
		"drain policy":           {"--drain-failure-policy=maybe"},
		"negative drain":         {"--drain-timeout=-1s"},
		"hook is protocol key":   {"--after-reboot-annotations=flatcar-linux-update.v1.flatcar-linux.net/reboot-ok"},
		"lease timing":           {"--lease-duration=5s", "--renew-deadline=10s"},
		"retry bounds":           {"--drain-retry-base=1m", "--drain-retry-max=1s"},
		"unknown flag":           {"--max-unavailible=2"},
		"stray argument":         {"now"},
		"no namespace":           {"--namespace="},
		"zero qps":               {"--kube-api-qps=0"},
		"negative qps":           {"--kube-api-qps=-1"},
		"qps not a number":       {"--kube-api-qps=NaN"},
		"zero burst":             {"--kube-api-burst=0"},
		"qps negative, burst ok": {"--kube-api-burst=5", "--kube-api-qps=-5"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			if name != "no namespace" {
				args = append([]string{"--namespace=ns"}, args...)
			}
			o, fs, err := parse(args)
			if fs != nil {
				fs.SetOutput(new(strings.Builder))
			}
			if err == nil {
				_, err = o.config()
			}
			if err == nil {
				t.Errorf("%v accepted", args)
			}
		})
	}
	t.Run("bad environment", func(t *testing.T) {
		t.Setenv("UPDATE_OPERATOR_DRAIN_TIMEOUT", "forever")
		if _, _, err := parse([]string{"--namespace=ns"}); err == nil || !strings.Contains(err.Error(), "UPDATE_OPERATOR_DRAIN_TIMEOUT") {
			t.Errorf("bad environment value: %v", err)
		}
	})
}

// README documents every flag.
func TestREADMEListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, fs, _ := parse(nil)
	if missing := flagenv.Undocumented(fs, string(readme)); len(missing) > 0 {
		t.Errorf("README does not document %v", missing)
	}
}

// /debug/pprof/ is served only with --profiling; probes and metrics always.
func TestServeHTTPProfiling(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		ctx, cancel := context.WithCancel(context.Background())
		if err := serveHTTP(ctx, addr, prometheus.NewRegistry(), func() error { return nil }, profiling, klog.Background()); err != nil {
			cancel()
			t.Fatal(err)
		}
		for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/debug/pprof/heap": map[bool]int{false: 404, true: 200}[profiling]} {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("profiling=%v: GET %s = %d, want %d", profiling, path, resp.StatusCode, want)
			}
		}
		cancel()
	}
}
