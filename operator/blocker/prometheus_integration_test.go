package blocker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// Rules of the test Prometheus: one alert that fires at once (twice, with different labels), one that
// stays pending for an hour, one that never fires.
const testRules = `groups:
  - name: slipway-blocker-test
    interval: 1s
    rules:
      - alert: SlipwayAlwaysFiring
        expr: vector(1)
        for: 0s
      - alert: SlipwayAlwaysFiring
        expr: label_replace(vector(1), "instance", "second", "", "")
        for: 0s
      - alert: SlipwayPendingForAnHour
        expr: vector(1)
        for: 1h
      - alert: SlipwayNeverFiring
        expr: vector(1) == 2
        for: 0s
`

// startPrometheus runs Debian's prometheus on a free loopback port with testRules and waits until
// SlipwayAlwaysFiring fires. It returns the base URL and a function that stops it (also run at cleanup).
func startPrometheus(t *testing.T) (string, func()) {
	t.Helper()
	testenv.NeedRealParts(t, "prometheus")
	dir := t.TempDir()
	p, err := testenv.StartPrometheus(dir, testRules)
	if errors.Is(err, testenv.ErrNoPrometheus) {
		t.Skip(err.Error() + ": the alerts blocker is not tested against a real Prometheus")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	stop, addr := p.Stop, strings.TrimPrefix(p.URL, "http://")
	logf := struct{ name string }{filepath.Join(dir, "prometheus.log")}
	url := "http://" + addr
	c, err := promapi.NewClient(promapi.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	api := promv1.NewAPI(c)
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res, err := api.Alerts(ctx)
		cancel()
		if err == nil {
			for _, a := range res.Alerts {
				if a.Labels[model.AlertNameLabel] == "SlipwayAlwaysFiring" && a.State == promv1.AlertStateFiring {
					t.Logf("prometheus %s up, alert firing after %s", addr, time.Since(start).Round(time.Millisecond))
					return url, stop
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
		if time.Since(start) > 60*time.Second {
			log, _ := os.ReadFile(logf.name)
			t.Fatalf("no firing alert after 60s (last error %v); log:\n%s", err, log)
		}
	}
}

func TestAlertsAgainstRealPrometheus(t *testing.T) {
	url, stop := startPrometheus(t)
	re := regexp.MustCompile
	cases := []struct {
		name             string
		include, exclude *regexp.Regexp
		pending          bool
		reason           string // "" = not blocked
	}{
		{"firing only by default", nil, nil, false, "1 alert firing: SlipwayAlwaysFiring"},
		{"pending too", nil, nil, true, "2 alerts firing or pending: SlipwayAlwaysFiring, SlipwayPendingForAnHour"},
		{"exclude the firing one", nil, re("^SlipwayAlways"), false, ""},
		{"exclude the firing one, pending too", nil, re("Always"), true, "1 alert firing or pending: SlipwayPendingForAnHour"},
		{"include the firing one", re("^SlipwayAlwaysFiring$"), nil, true, "1 alert firing or pending: SlipwayAlwaysFiring"},
		{"include only the silent one", re("^SlipwayNeverFiring$"), nil, true, ""},
		{"include pending, firing only", re("Pending"), nil, false, ""},
	}
	for _, c := range cases {
		a, err := NewAlerts(AlertsConfig{URL: url, Include: c.include, Exclude: c.exclude, IncludePending: c.pending})
		if err != nil {
			t.Fatal(err)
		}
		blocked, reason := a.Check(context.Background(), nil)
		if blocked != (c.reason != "") || reason != c.reason {
			t.Errorf("%s: got (%v, %q), want %q", c.name, blocked, reason, c.reason)
		}
	}

	// Many checks within the TTL cost one query; the next one after it asks again.
	rt, clock := &countingTransport{}, newFakeClock()
	cached, err := NewAlerts(AlertsConfig{URL: url, RoundTripper: rt, Now: clock.now, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if blocked, _ := cached.Check(context.Background(), nil); !blocked {
			t.Fatal("cached check not blocked")
		}
		clock.advance(400 * time.Millisecond)
	}
	if n := rt.n.Load(); n != 1 {
		t.Errorf("20 checks in 8s with a 10s TTL made %d queries, want 1", n)
	}
	clock.advance(2 * time.Second)
	cached.Check(context.Background(), nil)
	if n := rt.n.Load(); n != 2 {
		t.Errorf("after the TTL: %d queries in all, want 2", n)
	}

	// Prometheus gone: fail closed, with a reason that says so; the cached blocker too once its TTL ends.
	stop()
	fresh, err := NewAlerts(AlertsConfig{URL: url, Exclude: re(".")}) // would admit if Prometheus answered
	if err != nil {
		t.Fatal(err)
	}
	blocked, reason := fresh.Check(context.Background(), nil)
	if !blocked || !strings.HasPrefix(reason, "cannot read alerts from Prometheus at "+url+": ") || !strings.Contains(reason, "connection refused") {
		t.Errorf("stopped Prometheus: got (%v, %q)", blocked, reason)
	}
	clock.advance(10 * time.Second)
	if blocked, reason := cached.Check(context.Background(), nil); !blocked || !strings.HasPrefix(reason, "cannot read alerts") {
		t.Errorf("stopped Prometheus, cached blocker after its TTL: got (%v, %q)", blocked, reason)
	}
}
