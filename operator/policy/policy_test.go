package policy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/operator/admission"
)

// full is a Spec with every field set to something that compiles.
func full() Spec {
	s := Defaults()
	s.MaxUnavailable, s.MaxUnavailablePerGroup, s.MaxUnavailableControlPlane = "20%", "2", "1"
	s.GroupLabel, s.ControlPlaneOrder = "topology.kubernetes.io/zone", "workers-first"
	s.Windows = []string{"Mon-Fri 22:00-05:00 Europe/Berlin", "last-Sun 02:00-06:00", "kured sat,su 10pm-05:00 Europe/Berlin"}
	s.Exclusions = []string{"2026-12-24/2026-12-26"}
	s.FLUOWindow = FLUOWindow{Start: "Thu 14:00", Length: "1h", TimeZone: "Europe/Berlin"}
	s.Hooks = Hooks{Before: []string{"example.com/before"}, After: []string{"example.com/after"}}
	s.Canary = Canary{Nodes: 2, Bake: metav1.Duration{Duration: time.Hour}, MaxFailedPerVersion: 3}
	s.Settle = Settle{Time: metav1.Duration{Duration: 5 * time.Minute}, PDBs: true, Timeout: metav1.Duration{Duration: time.Hour}, TimeoutPolicy: "hold"}
	s.HealthChecks = []string{"deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas"}
	s.BlockingPodSelectors, s.BlockingPodSelectorsInCluster = []string{"app=db,tier in (primary)"}, []string{"app=backup"}
	s.MinReadyNodes = "80%"
	s.Alerts = Alerts{PrometheusURL: "https://prom.example:9090", Include: "Node", Exclude: "^Watchdog$", FiringOnly: true}
	s.Drain.PodSelector, s.Drain.Force, s.Drain.FailurePolicy = "app!=keep", true, "skip"
	s.Drain.SkipWaitForDeleteAll = metav1.Duration{Duration: 5 * time.Minute}
	s.Steering = Steering{PreferNoScheduleTaint: "example.com/pending", ExcludeFromLoadBalancers: true, PreLabels: []string{"kured=rebooting"}, PostLabels: []string{"kured-"}}
	s.MaxFailedReboots, s.StallPolicy = 2, "release"
	return s
}

// The flags' defaults compile into the policy the update-operator ran before it was one value: one
// budget, no window (a nil Schedule, not an interface holding a nil pointer), drain retried.
func TestDefaultsCompile(t *testing.T) {
	p, err := Compile(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if p.Schedule != nil {
		t.Errorf("no window configured, Schedule %v: want nil (always open)", p.Schedule)
	}
	if p.MaxUnavailable.String() != "1" || p.MaxUnavailablePerGroup != nil || p.ControlPlaneOrder != admission.OrderNone || p.Alerts != nil {
		t.Errorf("defaults: %+v", p)
	}
	if p.Drain.Policy != DrainRetry || p.Drain.GracePeriod != -time.Second || !p.Drain.WaitForVolumeDetach || !p.Settle.PDBs || p.Settle.Hold {
		t.Errorf("drain %+v settle %+v", p.Drain, p.Settle)
	}
	if a := p.Admission(); a.Schedule != nil || a.Canary.On() || a.UndrainableRetry != DefaultUndrainableRetry {
		t.Errorf("admission's policy: %+v", a)
	}
}

// MustCompile is Compile or a panic with Compile's error.
func TestMustCompile(t *testing.T) {
	want, err := Compile(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if got := MustCompile(Defaults()); !reflect.DeepEqual(got, want) {
		t.Errorf("MustCompile(Defaults()) = %+v, want Compile's %+v", got, want)
	}
	bad := Defaults()
	bad.StallPolicy = "sometimes"
	_, wantErr := Compile(bad)
	defer func() {
		r := recover()
		if err, ok := r.(error); !ok || wantErr == nil || err.Error() != wantErr.Error() {
			t.Errorf("MustCompile of a bad spec panicked with %v, want Compile's error %v", r, wantErr)
		}
	}()
	MustCompile(bad)
	t.Error("MustCompile of a bad spec returned")
}

// Every field survives the published JSON and compiles to the same policy: kubectl slipway decodes
// what the operator publishes with this type and compiles it with this function.
func TestSpecRoundTrip(t *testing.T) {
	s := full()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip through %s\ngave %+v\nwant %+v", raw, back, s)
	}
	p, err := Compile(back)
	if err != nil {
		t.Fatal(err)
	}
	if p.Schedule == nil || !strings.Contains(p.Schedule.String(), "Mon-Fri 22:00-05:00") || p.MaxUnavailablePerGroup.String() != "2" ||
		p.Canary != (admission.Canary{Nodes: 2, Bake: time.Hour, MaxFailed: 3}) || !p.Settle.Hold || p.Drain.Policy != DrainSkip ||
		len(p.HealthChecks) != 1 || p.MinReady == nil || p.Alerts == nil || len(p.Steer.Pre) != 1 || p.StallPolicy != "release" {
		t.Errorf("compiled: %+v", p)
	}
	// An empty field is left out: a Spec written by hand (a RebootPolicy) says only what it sets.
	if raw, _ := json.Marshal(Spec{}); strings.Contains(string(raw), "windows") || strings.Contains(string(raw), "canary") {
		t.Errorf("empty spec as %s", raw)
	}
}

// The Prometheus URL's secrets never reach the published Spec; the blocker still uses them.
func TestPublishedSpecHasNoSecrets(t *testing.T) {
	s := Defaults()
	s.Alerts.PrometheusURL = "https://bob:hunter2pass@prom.example:9090/prefix?token=t0ps3cret"
	p, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(p.Spec)
	for _, secret := range []string{"hunter2pass", "t0ps3cret"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("published spec carries %q: %s", secret, raw)
		}
	}
	if !strings.Contains(p.Spec.Alerts.PrometheusURL, "prom.example:9090") {
		t.Errorf("published URL %q does not say where", p.Spec.Alerts.PrometheusURL)
	}
	if s.Alerts.PrometheusURL == p.Spec.Alerts.PrometheusURL {
		t.Error("the caller's Spec was redacted in place")
	}
}

// Bad values are refused with the flag's name, whatever form they came in (flags, JSON).
func TestCompileRefuses(t *testing.T) {
	for _, c := range []struct {
		edit func(*Spec)
		want string
	}{
		{func(s *Spec) { s.MaxUnavailable = "" }, "max"},
		{func(s *Spec) { s.Windows = []string{"Mon 25:00-26:00"} }, "reboot-window:"},
		{func(s *Spec) { s.Exclusions = []string{"2026-13-01"} }, "reboot-exclusion:"},
		{func(s *Spec) { s.FLUOWindow.TimeZone = "Mars/Olympus" }, "reboot-window-timezone"},
		{func(s *Spec) { s.Drain.FailurePolicy = "maybe" }, "drain-failure-policy"},
		{func(s *Spec) { s.Canary.Bake = metav1.Duration{Duration: time.Hour} }, "canary-bake needs --canary-nodes"},
		{func(s *Spec) { s.HealthChecks = []string{"deployments.apps/web: object.status.("} }, "health-check"},
		{func(s *Spec) { s.Settle.TimeoutPolicy = "wait" }, "settle-timeout-policy"},
		{func(s *Spec) { s.Steering.PreLabels = []string{"=x"} }, "pre-reboot-node-labels"},
		{func(s *Spec) { s.GroupLabel = "not a label" }, "group-label"},
		{func(s *Spec) { s.Alerts.Require = []string{"Watchdog"} }, "alert-require needs --prometheus-url"},
		{func(s *Spec) { s.MaxFailedReboots, s.RebootTimeout = 1, metav1.Duration{} }, "max-failed-reboots needs --reboot-timeout"},
		{func(s *Spec) { s.Drain.RetryBase = metav1.Duration{} }, "drain-retry-base"},
		{func(s *Spec) { s.Drain.Delay = metav1.Duration{Duration: -time.Second} }, "drain-delay (-1s) and reboot-delay (0s) must not be negative"},
		{func(s *Spec) {
			s.Drain.Delay, s.Drain.RebootDelay = metav1.Duration{Duration: 20 * time.Minute}, metav1.Duration{Duration: 10 * time.Minute}
		}, "plus drain-timeout (10m0s) must be shorter than reboot-timeout (30m0s)"},
		{func(s *Spec) {
			s.Drain.Delay, s.Drain.RebootDelay = metav1.Duration{Duration: 15 * time.Minute}, metav1.Duration{Duration: 5 * time.Minute}
		}, "plus drain-timeout (10m0s) must be shorter"},
		{func(s *Spec) { s.MaxFailedReboots, s.RebootTimeout = 201, metav1.Duration{Duration: time.Hour} }, "max-failed-reboots 201: at most 200"},
		{func(s *Spec) { s.Canary.MaxFailedPerVersion = 201 }, "max-failed-per-version 201: at most 200"},
		{func(s *Spec) { s.BlockingPodSelectors = []string{"a in (b"} }, "blocking-pod-selector"},
		{func(s *Spec) { s.Hooks.Before = []string{"example.com/ok' + 'x"} }, "is not an annotation key"},
		{func(s *Spec) { s.Hooks.After = []string{"a b"} }, "is not an annotation key"},
	} {
		s := Defaults()
		c.edit(&s)
		p, err := Compile(s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", s, err, c.want)
		}
		if p != nil {
			t.Errorf("a refused spec compiled to %+v", p)
		}
	}
}

// What the operator publishes reads back as the same Spec; another format is refused with what to do.
func TestPublished(t *testing.T) {
	s := full()
	got, err := ReadPublished(Publish(Named{Spec: s}, Named{Name: "gpu", Spec: Defaults()}))
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := got.Default(); !ok || !reflect.DeepEqual(d, s) {
		t.Errorf("default policy %+v, %v", d, ok)
	}
	if len(got.Policies) != 2 || got.Policies[1].Name != "gpu" {
		t.Errorf("policies %+v", got.Policies)
	}
	for _, bad := range []string{`{"apiVersion":"slipway.dev/policy/v2","policies":[]}`, `{"policies":[]}`, `not json`} {
		if _, err := ReadPublished(bad); err == nil {
			t.Errorf("%s: read without error", bad)
		}
	}
	if _, ok := (Published{}).Default(); ok {
		t.Error("nothing published, yet a default policy")
	}
}
