package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/docs"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/flagenv"
	"github.com/slipway-dev/slipway/operator/blocker"
	"github.com/slipway-dev/slipway/operator/policy"
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
	// FLUO's window alone is built into the one schedule (the start log and the published status
	// read it from there).
	if cfg.Schedule == nil || !strings.Contains(cfg.Schedule.String(), "Thu 14:00 for 1h0m0s (Europe/Berlin)") {
		t.Errorf("window from the environment = %v", cfg.Schedule)
	}
	if cfg.Drain.Timeout != 10*time.Minute || cfg.Drain.Policy != "retry" || cfg.Drain.SkipWaitForDeleteAll != 0 || cfg.Drain.PodSelector != "" {
		t.Errorf("drain defaults: %+v", cfg.Drain)
	}
}

// With no policy flag the update-operator runs policy.Defaults(): the flags bind straight into the
// policy's Spec, so the two cannot drift apart.
func TestFlagDefaultsAreThePolicyDefaults(t *testing.T) {
	o, _, err := parse([]string{"--namespace=ns"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o.spec, policy.Defaults()) {
		t.Errorf("the flags' defaults\n%+v\nare not policy.Defaults()\n%+v", o.spec, policy.Defaults())
	}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Spec, policy.Defaults()) {
		t.Errorf("the compiled policy's Spec %+v is not what it was compiled from", cfg.Spec)
	}
}

// kured's steering flags: comma-separated and repeated, as kured's string slices.
func TestSteeringFlags(t *testing.T) {
	o, _, err := parse([]string{"--namespace=ns", "--prefer-no-schedule-taint=example.com/pending", "--exclude-from-load-balancers",
		"--pre-reboot-node-labels=kured=rebooting,nhc/x=true", "--post-reboot-node-labels=kured=done", "--post-reboot-node-labels=nhc/x-"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Steer
	if s.PreferNoScheduleTaint != "example.com/pending" || !s.ExcludeFromLoadBalancers || len(s.Pre) != 2 || len(s.Post) != 2 || !s.Post[1].Remove || s.Pre[1].Value != "true" {
		t.Errorf("steering %+v", s)
	}
}

// --drain-grace-period as a duration or in kured's whole seconds; negative leaves each pod its own.
func TestDrainGracePeriod(t *testing.T) {
	for arg, want := range map[string]time.Duration{"": -time.Second, "30": 30 * time.Second, "-1": -time.Second, "45s": 45 * time.Second, "0": 0} {
		args := []string{"--namespace=ns"}
		if arg != "" {
			args = append(args, "--drain-grace-period="+arg)
		}
		o, _, err := parse(args)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := o.config()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Drain.GracePeriod != want {
			t.Errorf("--drain-grace-period=%q: %s, want %s", arg, cfg.Drain.GracePeriod, want)
		}
	}
	if _, _, err := parse([]string{"--drain-grace-period=soon"}); err == nil {
		t.Error("--drain-grace-period=soon accepted")
	}
}

// kured's drain knobs: --skip-wait-for-delete-timeout in kured's whole seconds or as a duration,
// --drain-pod-selector as given.
func TestKuredDrainFlags(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want time.Duration
	}{{"300", 5 * time.Minute}, {"0", 0}, {"90s", 90 * time.Second}, {"2m", 2 * time.Minute}} {
		o, _, err := parse([]string{"--namespace=ns", "--skip-wait-for-delete-timeout=" + c.arg, "--drain-pod-selector=app!=db"})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := o.config()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Drain.SkipWaitForDeleteAll != c.want || cfg.Drain.PodSelector != "app!=db" {
			t.Errorf("%s: %+v", c.arg, cfg.Drain)
		}
	}
}

func TestFlagsRejected(t *testing.T) {
	// Each bad value is refused with a message naming the flag (or the word) it came from.
	cases := map[string]struct {
		args  []string
		names string
	}{
		"zero budget":            {[]string{"--max-unavailable=0"}, "max-unavailable"},
		"budget not a number":    {[]string{"--max-unavailable=lots"}, "max-unavailable"},
		"window hour":            {[]string{"--reboot-window-start=25:00", "--reboot-window-length=1h"}, "reboot-window-start"},
		"window without length":  {[]string{"--reboot-window-start=14:00"}, "reboot-window-length"},
		"window rule":            {[]string{"--reboot-window=Moonday 22:00-05:00"}, "reboot-window"},
		"unknown time zone":      {[]string{"--reboot-window-timezone=Mars/Olympus"}, "reboot-window-timezone"},
		"drain policy":           {[]string{"--drain-failure-policy=maybe"}, "drain-failure-policy"},
		"stall policy":           {[]string{"--stall-policy=maybe"}, "stall-policy"},
		"control-plane order":    {[]string{"--control-plane-order=last"}, "control-plane-order"},
		"negative drain":         {[]string{"--drain-timeout=-1s"}, "drain-timeout"},
		"hook is protocol key":   {[]string{"--after-reboot-annotations=flatcar-linux-update.v1.flatcar-linux.net/reboot-ok"}, "after-reboot-annotations"},
		"lease timing":           {[]string{"--lease-duration=5s", "--renew-deadline=10s"}, "lease-duration"},
		"retry bounds":           {[]string{"--drain-retry-base=1m", "--drain-retry-max=1s"}, "drain-retry-base"},
		"drain pod selector":     {[]string{"--drain-pod-selector=app in (a"}, "drain-pod-selector"},
		"negative settle":        {[]string{"--settle-time=-1s"}, "settle-time"},
		"taint key":              {[]string{"--prefer-no-schedule-taint=reboot pending"}, "prefer-no-schedule-taint"},
		"pre label without =":    {[]string{"--pre-reboot-node-labels=kured"}, "pre-reboot-node-labels"},
		"post label protocol":    {[]string{"--post-reboot-node-labels=flatcar-linux-update.v1.flatcar-linux.net/before-reboot=true"}, "post-reboot-node-labels"},
		"label is group label":   {[]string{"--group-label=example.com/pool", "--pre-reboot-node-labels=example.com/pool=rebooting"}, "budget group"},
		"zero volume timeout":    {[]string{"--volume-detach-timeout=0s"}, "volume-detach-timeout"},
		"negative canaries":      {[]string{"--canary-nodes=-1"}, "canary-nodes"},
		"bake without canaries":  {[]string{"--canary-bake=1h"}, "canary-bake"},
		"zero settle timeout":    {[]string{"--settle-timeout=0s"}, "settle-timeout"},
		"settle policy":          {[]string{"--settle-timeout-policy=wait"}, "settle-timeout-policy"},
		"profiling everywhere":   {[]string{"--profiling", "--profiling-address=:6060"}, "profiling-address"},
		"skip wait negative":     {[]string{"--skip-wait-for-delete-timeout=-5"}, "skip-wait-for-delete-timeout"},
		"skip wait word":         {[]string{"--skip-wait-for-delete-timeout=soon"}, "skip-wait-for-delete-timeout"},
		"unknown flag":           {[]string{"--max-unavailible=2"}, "max-unavailible"},
		"stray argument":         {[]string{"now"}, "now"},
		"no namespace":           {[]string{"--namespace="}, "namespace"},
		"zero qps":               {[]string{"--kube-api-qps=0"}, "kube-api-qps"},
		"negative qps":           {[]string{"--kube-api-qps=-1"}, "kube-api-qps"},
		"qps not a number":       {[]string{"--kube-api-qps=NaN"}, "kube-api-qps"},
		"zero burst":             {[]string{"--kube-api-burst=0"}, "kube-api-burst"},
		"qps negative, burst ok": {[]string{"--kube-api-burst=5", "--kube-api-qps=-5"}, "kube-api-qps"},
		"group label the agent writes (FLUO's group)": {[]string{"--group-label=flatcar-linux-update.v1.flatcar-linux.net/group"}, "group-label"},
		"group label FleetLock writes":                {[]string{"--group-label=update.slipway.dev/fleetlock-group"}, "group-label"},
		"group label the operator writes":             {[]string{"--group-label=update.slipway.dev/admitted-group"}, "group-label"},
		"group label not a key":                       {[]string{"--group-label=zone a"}, "group-label"},
		"required alert without Prometheus":           {[]string{"--alert-require=Watchdog"}, "alert-require"},
		"required alert empty":                        {[]string{"--prometheus-url=http://prom:9090", "--alert-require="}, "required alert"},
		"Prometheus URL with credentials, unparsable": {[]string{"--prometheus-url=http://u:pw@a b"}, "prometheus-url"},
		"FleetLock in the operator (moved)":           {[]string{"--fleetlock-address=:8081"}, "update-agent fleetlock"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			args := c.args
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
				t.Fatalf("%v accepted", args)
			}
			if !strings.Contains(err.Error(), c.names) {
				t.Errorf("%v: error %q does not name %s", args, err, c.names)
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
	readme := []byte(docs.All(t, "../../.."))
	_, fs, _ := parse(nil)
	if missing := flagenv.Undocumented(fs, string(readme)); len(missing) > 0 {
		t.Errorf("README does not document %v", missing)
	}
}

// /debug/pprof/ is served only with --profiling; probes and metrics always.
// /healthz fails when the controller is wedged (the kubelet restarts it and the lease passes on);
// /readyz says whether it is ready, separately.
func TestServeHTTPLiveness(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wedged := func() error { return errors.New("one node sync has been running for 3m0s") }
	if err := serveHTTP(ctx, addr, prometheus.NewRegistry(), wedged, wedged, klog.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "sync has been running") {
		t.Errorf("/healthz of a wedged controller: %d %q", resp.StatusCode, body)
	}
}

// --prometheus-url fails closed by default: it requires Watchdog unless --alert-require names others or
// --alert-accept-empty says an empty answer is fine; both at once is a contradiction and refused.
func TestPrometheusFailsClosedByDefault(t *testing.T) {
	required := func(args ...string) ([]string, error) {
		t.Helper()
		o, _, err := parse(append([]string{"--namespace=ns", "--prometheus-url=http://prometheus:9090"}, args...))
		if err != nil {
			return nil, err
		}
		cfg, err := o.config()
		if err != nil {
			return nil, err
		}
		if cfg.Alerts == nil { // the alerts blocker is built from it (policies.Blockers.Flags)
			t.Fatal("no alerts blocker")
		}
		return cfg.Alerts.Required(), nil
	}
	for _, k := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"Watchdog"}},
		{[]string{"--alert-require=DeadMansSwitch"}, []string{"DeadMansSwitch"}},
		{[]string{"--alert-accept-empty"}, nil},
	} {
		got, err := required(k.args...)
		if err != nil || !slices.Equal(got, k.want) {
			t.Errorf("%v: required %v (%v), want %v", k.args, got, err, k.want)
		}
	}
	if _, err := required("--alert-accept-empty", "--alert-require=Watchdog"); err == nil || !strings.Contains(err.Error(), "alert-accept-empty") {
		t.Errorf("--alert-accept-empty with --alert-require: %v", err)
	}
}

// Profiles are never on --http-address (which the metrics scraper reaches); with --profiling they are
// served on a loopback address of their own, and --profiling-address refuses any other.
func TestServeHTTPProfiling(t *testing.T) {
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	get := func(url string) int {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := free()
	if err := serveHTTP(ctx, addr, prometheus.NewRegistry(), func() error { return nil }, func() error { return errors.New("syncing") }, klog.Background()); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 503, "/metrics": 200, "/debug/pprof/heap": 404} {
		if got := get("http://" + addr + path); got != want {
			t.Errorf("GET %s = %d, want %d", path, got, want)
		}
	}
	prof := free()
	if err := servePprof(ctx, prof, klog.Background()); err != nil {
		t.Fatal(err)
	}
	if got := get("http://" + prof + "/debug/pprof/heap"); got != 200 {
		t.Errorf("GET /debug/pprof/heap on the profiling address = %d", got)
	}
	for _, bad := range []string{":6060", "0.0.0.0:6060", "10.0.0.1:6060", "example.com:6060"} {
		if err := servePprof(ctx, bad, klog.Background()); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("servePprof(%s): %v, want a refusal", bad, err)
		}
	}
	for _, good := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:6060"} {
		if err := loopback(good); err != nil {
			t.Errorf("loopback(%s): %v", good, err)
		}
	}
}

// --blocking-pod-selector takes one whole selector per flag, as kured parses it: "a=b,c=d" is one
// selector (AND), "tier in (db,cache)" is one selector, and repeating the flag gives OR.
func TestBlockingPodSelectorsAsKured(t *testing.T) {
	o, _, err := parse([]string{"--namespace=ns", "--blocking-pod-selector=a=b,c=d", "--blocking-pod-selector=tier in (db,cache)",
		"--blocking-pod-selector-in-cluster=app=backup,!canary"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.config(); err != nil {
		t.Fatal(err)
	}
	if got := o.spec.BlockingPodSelectors; len(got) != 2 || got[0] != "a=b,c=d" || got[1] != "tier in (db,cache)" {
		t.Fatalf("on-node selectors = %q, want the two flags' values whole", got)
	}
	if got := o.spec.BlockingPodSelectorsInCluster; len(got) != 1 || got[0] != "app=backup,!canary" {
		t.Fatalf("in-cluster selectors = %q", got)
	}
	sels, err := blocker.ParseSelectors(o.spec.BlockingPodSelectors)
	if err != nil {
		t.Fatal(err)
	}
	matches := func(l map[string]string) bool {
		for _, s := range sels {
			if s.Matches(labels.Set(l)) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"a": "b", "c": "d"}, true},
		{map[string]string{"a": "b"}, false}, // a=b alone is not a=b,c=d
		{map[string]string{"c": "d"}, false},
		{map[string]string{"tier": "cache"}, true},
		{map[string]string{"tier": "web"}, false},
	} {
		if got := matches(c.labels); got != c.want {
			t.Errorf("pod %v blocks = %v, want %v", c.labels, got, c.want)
		}
	}
	// An empty value is refused, not dropped: it would match every pod.
	o, _, err = parse([]string{"--namespace=ns", "--blocking-pod-selector="})
	if err == nil {
		_, err = o.config()
	}
	if err == nil || !strings.Contains(err.Error(), "blocking-pod-selector") {
		t.Errorf("empty selector: %v", err)
	}
}

// docs/reference/update-operator.md is generated from the flags (`make docs`) and must be current.
func TestFlagReference(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "") // defaults that come from the pod's environment
	t.Setenv("POD_NAME", "")
	_, fs, _ := parse(nil)
	page := "# update-operator flags\n\nGenerated from the flags' own `--help` text by `make docs` " +
		"(`TestFlagReference` fails when it is stale); [reference.md](../reference.md) says more about each. " +
		"A flag given on the command line wins over its environment variable.\n\n" + flagenv.Reference(fs, "UPDATE_OPERATOR")
	docs.CheckGenerated(t, "../../../docs/reference/update-operator.md", page)
}

// The README's quick start sets the policy of install.yaml with `kubectl set env`: the environment's
// UPDATE_OPERATOR_REBOOT_WINDOW and UPDATE_OPERATOR_MAX_UNAVAILABLE are the flags.
func TestPolicyFromTheEnvironment(t *testing.T) {
	t.Setenv("UPDATE_OPERATOR_REBOOT_WINDOW", "Mon-Fri 22:00-05:00 Europe/Berlin")
	t.Setenv("UPDATE_OPERATOR_MAX_UNAVAILABLE", "10%")
	o, _, err := parse([]string{"--namespace=ns"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxUnavailable.String() != "10%" || cfg.Schedule == nil || !strings.Contains(cfg.Schedule.String(), "Mon-Fri 22:00-05:00 Europe/Berlin") {
		t.Errorf("from the environment: max-unavailable %s, schedule %v", cfg.MaxUnavailable, cfg.Schedule)
	}
}

// Each process is its own leader-election candidate: the pod's name (else the hostname) plus a suffix
// of the process, so a restarted container never takes over the old lease in the old term at once.
func TestDefaultIdentity(t *testing.T) {
	a, b := defaultIdentity("slipway-update-operator-7d9f-abcde", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), defaultIdentity("slipway-update-operator-7d9f-abcde", "11111111-2222")
	if a != "slipway-update-operator-7d9f-abcde_0f1e2d3c" || b == a {
		t.Errorf("identities %q and %q: want the pod's name and a per-process suffix, different per process", a, b)
	}
	host, _ := os.Hostname()
	if got := defaultIdentity("", "abcdef12"); got != host+"_abcdef12" {
		t.Errorf("without POD_NAME: %q, want the hostname and the suffix", got)
	}
}

// The operator's clients feed its clock: a client built from the wrapped config learns the API
// server's offset from the Date of its responses (here an API server three minutes ahead).
func TestServerClockWired(t *testing.T) {
	ahead := 3 * time.Minute
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", time.Now().Add(ahead).UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"35","gitVersion":"v1.35.0"}`))
	}))
	defer srv.Close()
	rc := &rest.Config{Host: srv.URL}
	clock := serverClock(rc, klog.Background())
	if off, known := clock.Offset(); known || off != 0 {
		t.Fatalf("before any response: %v %v", off, known)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
	if off, known := clock.Offset(); !known || off < ahead-2*time.Second || off > ahead+2*time.Second {
		t.Fatalf("offset %v (known %v), want about %v", off, known, ahead)
	}
	if d := clock.Now().Sub(time.Now()); d < ahead-2*time.Second || d > ahead+2*time.Second {
		t.Fatalf("Now is %v from this machine's clock, want about %v", d, ahead)
	}
}
