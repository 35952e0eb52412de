package blocker

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

func alert(name string, state promv1.AlertState) promv1.Alert {
	return promv1.Alert{Labels: model.LabelSet{model.AlertNameLabel: model.LabelValue(name), "instance": "x"}, State: state}
}

func TestBlockingAlertsKnownAnswers(t *testing.T) {
	alerts := []promv1.Alert{
		alert("NodeDown", promv1.AlertStateFiring),
		alert("NodeDown", promv1.AlertStateFiring), // same name, other labels: named once
		alert("Watchdog", promv1.AlertStateFiring),
		alert("DiskFilling", promv1.AlertStatePending),
		alert("Gone", promv1.AlertStateInactive),
		alert("CPUHigh", promv1.AlertStateFiring),
	}
	re := regexp.MustCompile
	cases := []struct {
		name             string
		include, exclude *regexp.Regexp
		pending          bool
		want             []string
	}{
		{"firing only", nil, nil, false, []string{"CPUHigh", "NodeDown", "Watchdog"}},
		{"with pending", nil, nil, true, []string{"CPUHigh", "DiskFilling", "NodeDown", "Watchdog"}},
		{"exclude", nil, re("^Watchdog$"), false, []string{"CPUHigh", "NodeDown"}},
		{"exclude is unanchored", nil, re("High|dog"), false, []string{"NodeDown"}},
		{"include", re("^Node|^Disk"), nil, false, []string{"NodeDown"}},
		{"include with pending", re("^Node|^Disk"), nil, true, []string{"DiskFilling", "NodeDown"}},
		{"include and exclude", re("^Node|^Disk|^CPU"), re("CPU"), true, []string{"DiskFilling", "NodeDown"}},
		{"nothing left", re("^Nope$"), nil, true, nil},
		{"inactive never", re("^Gone$"), nil, true, nil},
	}
	for _, c := range cases {
		if got := blockingAlerts(alerts, c.include, c.exclude, c.pending); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	a := &Alerts{cfg: AlertsConfig{IncludePending: true}}
	if got := a.judge(alerts); !got.blocked || got.reason != "4 alerts firing or pending: CPUHigh, DiskFilling, NodeDown (+1 more)" {
		t.Errorf("judge = %+v", got)
	}
	a = &Alerts{cfg: AlertsConfig{Include: re("CPU")}}
	if got := a.judge(alerts); !got.blocked || got.reason != "1 alert firing: CPUHigh" {
		t.Errorf("judge = %+v", got)
	}
}

func TestNewAlertsRefusesBadURLs(t *testing.T) {
	for _, bad := range []string{"", "prometheus:9090", "ftp://x", "http://", "://x", "http://a b"} {
		if _, err := NewAlerts(AlertsConfig{URL: bad}); err == nil {
			t.Errorf("NewAlerts(%q) accepted", bad)
		}
	}
	a, err := NewAlerts(AlertsConfig{URL: "https://user:secret@prom.example:9090/prefix"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(a.addr, "secret") || a.cfg.Timeout != 5*time.Second || a.cfg.TTL != 10*time.Second || !a.FleetWide() || a.Name() != NameAlerts {
		t.Errorf("NewAlerts: %+v", a)
	}
}

// countingTransport counts the requests that reach the network.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// fakeClock is a settable clock for the TTL.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.t.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.t.Add(int64(d)) }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.t.Store(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC).UnixNano())
	return c
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestAlertsUnreachableBlocksAndIsReusedForTheTTL(t *testing.T) {
	rt, clock := &countingTransport{}, newFakeClock()
	addr := closedPort(t)
	a, err := NewAlerts(AlertsConfig{URL: "http://" + addr, RoundTripper: rt, Now: clock.now, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		blocked, reason := a.Check(context.Background(), nil)
		want := fmt.Sprintf("cannot read alerts from Prometheus at http://%s: ", addr)
		if !blocked || !strings.HasPrefix(reason, want) || !strings.Contains(reason, "connection refused") {
			t.Fatalf("closed port: got (%v, %q), want prefix %q", blocked, reason, want)
		}
	}
	if n := rt.n.Load(); n != 1 {
		t.Errorf("5 checks within the TTL made %d requests, want 1", n)
	}
	clock.advance(10 * time.Second)
	a.Check(context.Background(), nil)
	if n := rt.n.Load(); n != 2 {
		t.Errorf("a check after the TTL made %d requests in all, want 2", n)
	}
	// A caller that gave up gets a block that is not cached as Prometheus' answer.
	clock.advance(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if blocked, reason := a.Check(ctx, nil); !blocked || !strings.HasPrefix(reason, "check cancelled") {
		t.Errorf("cancelled: got (%v, %q)", blocked, reason)
	}
}

func TestAlertsTimeoutBlocks(t *testing.T) {
	// A peer that accepts and never answers: the query must end at the timeout, and block.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	a, err := NewAlerts(AlertsConfig{URL: "http://" + l.Addr().String(), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	blocked, reason := a.Check(context.Background(), nil)
	want := fmt.Sprintf("Prometheus at http://%s did not answer within 300ms", l.Addr())
	if !blocked || reason != want {
		t.Errorf("got (%v, %q), want %q", blocked, reason, want)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("check took %s", d)
	}
}

// --alert-require: an answer without the required alert firing holds every node (fail closed: a
// Prometheus that just started, or lost its rules, answers "no alerts"); the required alert itself
// never blocks.
func TestRequiredAlerts(t *testing.T) {
	a := &Alerts{cfg: AlertsConfig{Require: []string{"Watchdog"}}, addr: "http://prom:9090"}
	for _, c := range []struct {
		name    string
		alerts  []promv1.Alert
		blocked bool
		reason  string
	}{
		{"empty answer", nil, true, "required 1 alert not firing: Watchdog (Prometheus at http://prom:9090 answered, but without it the alert pipeline is not proven to work)"},
		{"only pending", []promv1.Alert{alert("Watchdog", promv1.AlertStatePending)}, true, "required 1 alert not firing: Watchdog"},
		{"firing, nothing else", []promv1.Alert{alert("Watchdog", promv1.AlertStateFiring)}, false, ""},
		{"firing, and another", []promv1.Alert{alert("Watchdog", promv1.AlertStateFiring), alert("NodeDown", promv1.AlertStateFiring)}, true, "1 alert firing: NodeDown"},
	} {
		got := a.judge(c.alerts)
		if got.blocked != c.blocked || !strings.HasPrefix(got.reason, c.reason) {
			t.Errorf("%s: got (%v, %q), want (%v, %q...)", c.name, got.blocked, got.reason, c.blocked, c.reason)
		}
	}
	if _, err := NewAlerts(AlertsConfig{URL: "http://prom:9090", Require: []string{""}}); err == nil {
		t.Error("an empty required alert name accepted")
	}
}

// A URL's credentials (user info, query values) appear in no reason, no error: the reason goes into
// blocked-by on every waiting Node (readable by every agent), Events, the fleet status and
// notifications.
func TestAlertsURLCredentialsNeverRepeated(t *testing.T) {
	addr := closedPort(t)
	raw := "http://bob:hunter2pass@" + addr + "/prom?access_token=tok3n-s3cret&org=ops"
	a, err := NewAlerts(AlertsConfig{URL: raw, Now: newFakeClock().now})
	if err != nil {
		t.Fatal(err)
	}
	_, reason := a.Check(context.Background(), nil)
	for _, leak := range []string{"hunter2pass", "tok3n-s3cret", "bob"} {
		if strings.Contains(reason, leak) || strings.Contains(a.addr, leak) {
			t.Errorf("%q repeated: reason %q, addr %q", leak, reason, a.addr)
		}
	}
	if !strings.Contains(reason, "connection refused") || !strings.Contains(reason, "http://***@"+addr+"/prom?access_token=***&org=***") {
		t.Errorf("reason %q does not say where and why", reason)
	}
	_, err = NewAlerts(AlertsConfig{URL: "http://bob:hunter2pass@a b/?x"})
	if err == nil || strings.Contains(err.Error(), "hunter2pass") {
		t.Errorf("unparsable URL: %v", err)
	}
}

// An answer over MaxAnswerBytes is not read whole: it is an error, and the fleet is held with it as the
// reason (fail closed), so one huge answer cannot take the leader's memory. An answer under the bound
// is read as usual.
func TestAlertsAnswerIsBounded(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"success","data":{"alerts":[{"labels":{"alertname":"`)
		chunk := strings.Repeat("x", 1<<20)
		for i := 0; i < MaxAnswerBytes>>20+2; i++ {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `"},"state":"firing"}]}}`)
	}))
	defer big.Close()
	a, err := NewAlerts(AlertsConfig{URL: big.URL, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	blocked, reason := a.Check(context.Background(), nil)
	if !blocked || !strings.Contains(reason, "answer larger than 8 MiB") {
		t.Errorf("a huge answer: (%v, %q), want held with the bound as the reason", blocked, reason)
	}
	small := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"success","data":{"alerts":[]}}`)
	}))
	defer small.Close()
	if a, err = NewAlerts(AlertsConfig{URL: small.URL}); err != nil {
		t.Fatal(err)
	}
	if blocked, reason := a.Check(context.Background(), nil); blocked {
		t.Errorf("an empty answer without required alerts: held (%q)", reason)
	}
}
