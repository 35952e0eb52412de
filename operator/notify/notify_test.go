package notify

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/redact"
)

// request is what the webhook received.
type request struct {
	Method, Path, ContentType, Body string
}

// webhook is a local HTTP server recording every request; hang makes it hold requests until release.
type webhook struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []request
	arrived chan request
	hang    bool
	release chan struct{}
	// requests being handled, the most at once, and those answered (released or given up by the client)
	inFlight, maxInFlight, answered int
}

func newWebhook(t *testing.T, hang bool) *webhook {
	t.Helper()
	w := &webhook{arrived: make(chan request, 100), hang: hang, release: make(chan struct{})}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := request{r.Method, r.URL.Path, r.Header.Get("Content-Type"), string(body)}
		w.mu.Lock()
		w.got = append(w.got, req)
		w.inFlight++
		w.maxInFlight = max(w.maxInFlight, w.inFlight)
		w.mu.Unlock()
		w.arrived <- req
		if w.hang {
			select {
			case <-w.release:
			case <-r.Context().Done():
			}
		}
		w.mu.Lock()
		w.inFlight--
		w.answered++
		w.mu.Unlock()
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		w.unhang()
		w.srv.Close()
	})
	return w
}

func (w *webhook) unhang() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.release:
	default:
		close(w.release)
	}
}

// counts reads got, maxInFlight and answered.
func (w *webhook) counts() (got, maxInFlight, answered int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.got), w.maxInFlight, w.answered
}

// url is the shoutrrr generic-webhook URL of path on this server.
func (w *webhook) url(path, query string) string {
	return "generic://" + w.srv.Listener.Addr().String() + path + "?disabletls=yes" + query
}

// next waits for the next request.
func (w *webhook) next(t *testing.T) request {
	t.Helper()
	select {
	case r := <-w.arrived:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no request reached the webhook within 5s")
		return request{}
	}
}

// quiet asserts that no request arrives for d.
func (w *webhook) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case r := <-w.arrived:
		t.Fatalf("unexpected request %+v", r)
	case <-time.After(d):
	}
}

func run(t *testing.T, s *Sender) (cancel func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.Run(ctx)
		close(done)
	}()
	cancel = func() {
		stop()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Error("Run did not return within 2s of its context ending")
		}
	}
	t.Cleanup(cancel)
	return cancel
}

// metric is the value of the counter name in reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("%s is not registered", name)
	return 0
}

const (
	sent    = "slipway_operator_notifications_sent_total"
	dropped = "slipway_operator_notifications_dropped_total"
	failed  = "slipway_operator_notifications_failed_total"
)

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("not within 5s: %s", what)
}

// Every kind of Event reaches shoutrrr's generic webhook as the exact payload: JSON with the template,
// plain text without; in order; counted as sent.
func TestDeliversToGenericWebhook(t *testing.T) {
	hook := newWebhook(t, false)
	reg := prometheus.NewRegistry()
	s, err := New([]string{hook.url("/json", "&template=json"), hook.url("/plain", "")}, reg, klog.Background(), BlockedAfter(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Targets(), []string{"generic://" + hook.srv.Listener.Addr().String() + "/…?…", "generic://" + hook.srv.Listener.Addr().String() + "/…?…"}; !slices.Equal(got, want) {
		t.Errorf("Targets() = %q, want %q", got, want)
	}
	run(t, s)
	events := []Event{
		{Kind: KindCycleStarted, Node: "worker-3"},
		{Kind: KindCycleFinished, Node: "worker-3", Took: 4*time.Minute + 12*time.Second},
		{Kind: KindStalled, Node: "worker-4", Reason: "not-ready", Took: 30 * time.Minute, Detail: "rebooted but not Ready; check the kubelet"},
		{Kind: KindCycleAborted, Node: "worker-5", Reason: "the update-agent withdrew its request"},
		{Kind: KindFleetPaused, Reason: "2 of --max-failed-reboots=2 reboots failed (worker-4, worker-6)", Detail: "resume with kubectl slipway resume"},
	}
	want := []string{
		"node worker-3: reboot cycle started",
		"node worker-3: reboot finished (boot ID changed, Ready) in 4m12s",
		"node worker-4: stalled (not-ready) for 30m00s: rebooted but not Ready; check the kubelet",
		"node worker-5: reboot cycle aborted without a verified reboot: the update-agent withdrew its request",
		"fleet paused: 2 of --max-failed-reboots=2 reboots failed (worker-4, worker-6); resume with kubectl slipway resume",
		"node worker-7: waiting for 0s, blocked by alerts: KubeNodeNotReady firing",
	}
	for _, ev := range events {
		s.Notify(ev)
	}
	s.Blocked("worker-7", "alerts: KubeNodeNotReady firing") // sent 50ms later, once
	got := map[string][]request{}
	for range 2 * len(want) {
		r := hook.next(t)
		got[r.Path] = append(got[r.Path], r)
	}
	// How long worker-7 waited is the rule's timer as this machine ran it: 0s on a quiet machine, more
	// on a loaded one; the rest of the text is exact.
	waited := regexp.MustCompile(`waiting for [0-9]+s`)
	norm := func(r request) request { r.Body = waited.ReplaceAllString(r.Body, "waiting for Ns"); return r }
	for i, msg := range want {
		if g, w := norm(got["/json"][i]), norm(request{"POST", "/json", "application/json", fmt.Sprintf(`{"message":%q}`, msg)}); g != w {
			t.Errorf("JSON request %d:\n got %+v\nwant %+v", i, g, w)
		}
		if g, w := norm(got["/plain"][i]), norm(request{"POST", "/plain", "text/plain", msg}); g != w {
			t.Errorf("plain request %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	s.Blocked("worker-7", "alerts: KubeNodeNotReady firing")
	hook.quiet(t, 150*time.Millisecond) // once per episode
	// sent counts a message once its response is back, which may be after the endpoint saw it.
	for deadline := time.Now().Add(10 * time.Second); metric(t, reg, sent) != 12 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if g := metric(t, reg, sent); g != 12 {
		t.Errorf("%s = %v, want 12", sent, g)
	}
	if g := metric(t, reg, dropped) + metric(t, reg, failed); g != 0 {
		t.Errorf("dropped+failed = %v, want 0", g)
	}
}

// An endpoint that accepts and does not answer: Notify still returns at once, the queue fills and
// drops (counted), and once the endpoint answers the queued messages go out in order, one at a time.
// With a short send timeout, the hung send counts as failed and is given up (generic:// bounds the
// whole request by it), and the next message goes out although the endpoint still hangs.
func TestHungEndpointNeverBlocksTheCaller(t *testing.T) {
	t.Run("queue", func(t *testing.T) {
		// A timeout that cannot pass during the test: the endpoint hangs until the test releases it.
		hook, reg, s := hungAtN0(t, time.Hour)
		// n0 is off the queue and its send hangs: the 10 calls must all return while it does.
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			for i := 1; i <= 10; i++ {
				s.Notify(Event{Kind: KindCycleStarted, Node: fmt.Sprintf("n%d", i)})
			}
		}()
		select {
		case <-returned:
		case <-time.After(30 * time.Second): // only so that a Notify that blocks fails instead of hanging
			t.Fatal("10 Notify calls with the endpoint hung did not return")
		}
		if got, _, answered := hook.counts(); got != 1 || answered != 0 {
			t.Fatalf("the endpoint has %d requests, %d answered, while it hangs; want n0, unanswered", got, answered)
		}
		if g := metric(t, reg, dropped); g != 6 {
			t.Errorf("dropped_total = %v, want 6 (10 sent while one hangs and 4 wait in the queue)", g)
		}
		if g := metric(t, reg, sent) + metric(t, reg, failed); g != 0 {
			t.Errorf("sent+failed = %v while the first send hangs, want 0", g)
		}
		// The endpoint answers: n0, then the 4 queued messages, in order, one at a time; nothing else.
		hook.unhang()
		for i := 1; i <= 4; i++ {
			if r, want := hook.next(t), fmt.Sprintf("node n%d: reboot cycle started", i); r.Body != want {
				t.Errorf("queued message %d: %q, want %q", i, r.Body, want)
			}
		}
		eventually(t, "n0 and the 4 queued messages counted as sent", func() bool { return metric(t, reg, sent) == 5 })
		// All 5 answered and the queue is empty: the 6 dropped ones cannot come.
		if n := len(s.targets[0].queue); n != 0 {
			t.Errorf("%d messages still queued", n)
		}
		if got, most, _ := hook.counts(); got != 5 || most != 1 {
			t.Errorf("the endpoint got %d requests, at most %d at once; want 5, one at a time", got, most)
		}
		if g := metric(t, reg, failed); g != 0 {
			t.Errorf("failed_total = %v, want 0", g)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		hook, reg, s := hungAtN0(t, 100*time.Millisecond)
		s.Notify(Event{Kind: KindCycleStarted, Node: "n1"})
		// n1 goes out only once n0's send ended, the endpoint still hung (never released): n0 timed
		// out, was counted as failed, and its request was given up.
		if r := hook.next(t); r.Body != "node n1: reboot cycle started" {
			t.Fatalf("after the timeout: %+v, want n1", r)
		}
		if g := metric(t, reg, failed); g < 1 {
			t.Errorf("failed_total = %v when n1 went out, want n0 counted", g)
		}
		if g := metric(t, reg, sent) + metric(t, reg, dropped); g != 0 {
			t.Errorf("sent+dropped = %v, want 0", g)
		}
	})
}

// A hung endpoint delays only its own messages: another URL keeps receiving, nothing is dropped, and
// Run returns when its context ends although a send still hangs.
func TestHungEndpointDoesNotDelayOthers(t *testing.T) {
	hung, ok := newWebhook(t, true), newWebhook(t, false)
	reg := prometheus.NewRegistry()
	s, err := New([]string{hung.url("/hung", ""), ok.url("/ok", "")}, reg, klog.Background(), QueueSize(8), SendTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, s)
	s.Notify(Event{Kind: KindCycleStarted, Node: "n0"})
	hung.next(t)
	ok.next(t)
	for i := 1; i <= 5; i++ {
		s.Notify(Event{Kind: KindCycleFinished, Node: fmt.Sprintf("n%d", i)})
		if r, want := ok.next(t), fmt.Sprintf("node n%d: reboot finished (boot ID changed, Ready)", i); r.Body != want {
			t.Errorf("healthy endpoint got %q, want %q", r.Body, want)
		}
	}
	if g := metric(t, reg, dropped); g != 0 {
		t.Errorf("dropped_total = %v, want 0", g)
	}
	start := time.Now()
	stop()
	t.Logf("Run returned %s after cancel with a send hung", time.Since(start))
}

func TestRefusesBadURLs(t *testing.T) {
	good := "generic://127.0.0.1:9/hook?template=json&disabletls=yes"
	for _, c := range []struct {
		url, want, secret string
	}{
		{"", "notify URL 2 of 2 is empty", ""},
		{"://nothing", "notify URL 2 of 2 is not a URL: missing protocol scheme", ""},
		{"hooks.example.com/T0123/verysecretpath", "notify URL 2 of 2 has no service: want e.g. slack://, teams://, generic://...", "verysecretpath"},
		{"nosuch://host/x", `notify URL 2 of 2 "nosuch://host/…": unknown service "nosuch" (known: bark, discord, generic, `, ""},
		{"slack://xoxb:supersecrettoken@C0123", `notify URL 2 of 2 "slack://***@C0123": invalid slack token format`, "supersecrettoken"},
		{"telegram://secrettoken42@telegram", `notify URL 2 of 2 "telegram://***@telegram": invalid telegram token: ***:`, "secrettoken42"},
		{"discord://", `notify URL 2 of 2 "discord://": setting config URL: webhook ID missing from config URL`, ""},
		// kured's documented Teams URL (docs.kured.dev), the old connector form: said what to write now.
		{"teams://11111111-4444-4444-8444-cccccccccccc@22222222-4444-4444-8444-cccccccccccc/33333333012222222222333333333344/44444444-4444-4444-8444-cccccccccccc?host=example.webhook.office.com",
			`notify URL 2 of 2 "teams://***@22222222-4444-4444-8444-cccccccccccc/…?…": invalid URL format: missing extraId component: this is the old Office 365 connector form`, ""},
		{"generic:///hook", `notify URL 2 of 2 "generic:///…": no host`, ""},
		{"generic://h/x?template=xml", `notify URL 2 of 2 "generic://h/…?…": template "xml": only json (or none, for the message as plain text)`, ""},
		{"generic://h/x?disabletls=maybe", `notify URL 2 of 2 "generic://h/…?…": setting config properties from service URL query: accepted values are 1, true, yes or 0, false, no`, ""},
		{"logger+http://h/x", `notify URL 2 of 2 "logger+http://h/…": service "logger" has no logger+<scheme>:// form`, ""},
		{"smtp://user:mailpassword@mail.example:587/?from=a@example&to=b@example&auth=Bogus", `notify URL 2 of 2 "smtp://***@mail.example:587?…": setting query parameter "auth" to "Bogus": `, "mailpassword"},
		{"smtp://user:mailpassword@mail.example:587/?from=ops@example.com", `notify URL 2 of 2 "smtp://***@mail.example:587?…": toAddress missing from config URL`, "mailpassword"},
		{"smtp://mail.example/?from=ops@example.com&to=a@example.com,Bob%20%3Cb@example.com%3E", `notify URL 2 of 2 "smtp://mail.example?…": toaddresses: "Bob+<b@example.com>": want a bare address, without a name`, ""},
		{"smtp://mail.example/?from=ops%0d%0aBcc:%20x@evil.example&to=a@example.com", `notify URL 2 of 2 "smtp://mail.example?…": fromaddress: "ops\r\nBcc:+x@evil.example" is not an e-mail address`, ""},
		{"smtp://mail.example/?from=ops@example.com&to=a@example.com&auth=CRAMMD5", `notify URL 2 of 2 "smtp://mail.example?…": auth=CRAMMD5 needs a user name`, ""},
		{"smtp://mail.example/?from=ops@example.com&to=a@example.com&encryption=ExplicitTLS&usestarttls=No", `notify URL 2 of 2 "smtp://mail.example?…": the encryption asked for is STARTTLS, and usestarttls=No refuses it`, ""},
		{"smtp://mail.example/?from=ops@example.com&to=a@example.com&timeout=0s", `notify URL 2 of 2 "smtp://mail.example?…": timeout 0s: want more than 0`, ""},
	} {
		_, err := New([]string{good, c.url}, prometheus.NewRegistry(), klog.Background())
		if err == nil {
			t.Errorf("%q accepted", c.url)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.url, err, c.want)
		}
		if c.secret != "" && strings.Contains(err.Error(), c.secret) {
			t.Errorf("%q: error shows the secret: %v", c.url, err)
		}
	}
	for _, u := range []string{good, "generic+http://127.0.0.1:9/hook", "logger://", "generic://h/x?template=JSON"} {
		if _, err := New([]string{u}, nil, klog.Background()); err != nil {
			t.Errorf("%q refused: %v", u, err)
		}
	}
	if _, err := New(nil, nil, klog.Background(), QueueSize(0)); err == nil {
		t.Error("queue size 0 accepted")
	}
}

// A send error names the URL's secrets nowhere.
func TestScrubsSecretsFromErrors(t *testing.T) {
	tgt, err := newTarget("generic://127.0.0.1:1/verysecretwebhookid?disabletls=yes&@Authorization=Bearer%20sekrit-token-123", 1, DefaultSendTimeout, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	sendErr := tgt.svc.Send("x", nil)
	if sendErr == nil {
		t.Fatal("send to a closed port succeeded")
	}
	got := redact.Scrub(sendErr.Error(), tgt.secrets)
	if strings.Contains(got, "verysecretwebhookid") || strings.Contains(got, "sekrit") {
		t.Errorf("scrubbed error still has a secret: %s", got)
	}
	if !strings.Contains(got, "/***") {
		t.Errorf("scrubbed error %q: want the webhook path masked", got)
	}
}

func TestMessages(t *testing.T) {
	for _, c := range []struct {
		ev   Event
		want string
	}{
		{Event{Kind: KindCycleStarted, Node: "a", Detail: "budget 1 of 2"}, "node a: reboot cycle started (budget 1 of 2)"},
		{Event{Kind: KindCycleFinished, Node: "a"}, "node a: reboot finished (boot ID changed, Ready)"},
		{Event{Kind: KindCycleFinished, Node: "a", Took: 90 * time.Minute, Detail: "uncordoned"}, "node a: reboot finished (boot ID changed, Ready) in 1h30m; uncordoned"},
		{Event{Kind: KindStalled, Node: "a", Reason: "reboot-timeout"}, "node a: stalled (reboot-timeout)"},
		{Event{Kind: KindBlocked, Node: "a", Reason: "paused: fleet paused by alice", Took: time.Hour + 20*time.Second, Detail: "and 3 other nodes held by paused"}, "node a: waiting for 1h00m, blocked by paused: fleet paused by alice (and 3 other nodes held by paused)"},
		{Event{Kind: KindFleetPaused}, "fleet paused"},
		{Event{Kind: "something-new", Node: "a", Reason: "why", Detail: "more"}, "node a: something-new: why; more"},
		{Event{Kind: KindCycleAborted, Node: "a", Reason: strings.Repeat("é", 600)}, "node a: reboot cycle aborted without a verified reboot: " + strings.Repeat("é", 470) + "…"},
	} {
		if got := Message(c.ev); got != c.want {
			t.Errorf("Message(%+v):\n got %q\nwant %q", c.ev, got, c.want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0s", 1499 * time.Millisecond: "1s", 59 * time.Second: "59s", 61 * time.Second: "1m01s", 4*time.Minute + 12*time.Second: "4m12s", 26*time.Hour + 3*time.Minute + 40*time.Second: "26h04m"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%s) = %q, want %q", d, got, want)
		}
	}
}

// Off (nil, or no URLs): every call is accepted and does nothing.
func TestOff(t *testing.T) {
	var nilSender *Sender
	empty, err := New(nil, prometheus.NewRegistry(), klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Sender{nilSender, empty} {
		s.Notify(Event{Kind: KindStalled, Node: "a"})
		s.Blocked("a", "alerts: x")
		s.Unblocked("a")
		if s.Enabled() {
			t.Error("enabled without URLs")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s.Run(ctx)
	}
	var n Notifier = nilSender
	n.Notify(Event{})
}

// Text from nodes, tenants and Prometheus reaches chat services as text: no mention, link or
// formatting in a node name or a reason survives its service's escaping.
func TestEscapedForEachService(t *testing.T) {
	hostile := "node <!channel>: blocked by pods-on-node: *evil* [docs](https://evil.example) <https://evil.example|docs> @everyone & `x`"
	for scheme, want := range map[string]string{
		"slack":   "node &lt;!channel&gt;: blocked by pods-on-node: \\*evil\\* \\[docs\\]\\(https://evil.example\\) &lt;https://evil.example\\|docs&gt; @\u200beveryone &amp; \\`x\\`",
		"discord": "node <!channel>: blocked by pods-on-node: \\*evil\\* \\[docs\\]\\(https://evil.example\\) <https://evil.example\\|docs> @\u200beveryone & \\`x\\`",
		"teams":   "node &lt;!channel&gt;: blocked by pods-on-node: \\*evil\\* \\[docs\\]\\(https://evil.example\\) &lt;https://evil.example\\|docs&gt; @everyone &amp; \\`x\\`",
	} {
		if got := escaper(scheme)(hostile); got != want {
			t.Errorf("%s:\n got %q\nwant %q", scheme, got, want)
		}
	}
	for _, plain := range []string{"generic", "logger", "ntfy", "telegram"} {
		if escaper(plain) != nil {
			t.Errorf("%s is plain text: nothing to escape", plain)
		}
	}
}

// The escaping goes with the target: a Slack URL's target escapes, a generic one does not.
func TestTargetsEscapeTheirMarkup(t *testing.T) {
	slack, err := newTarget("slack://hook:T00000000-B00000000-XXXXXXXXXXXXXXXXXXXXXXXX@webhook", 1, DefaultSendTimeout, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	if slack.escape == nil || slack.escape("<!here>") != "&lt;!here&gt;" {
		t.Error("the Slack target does not escape Slack's markup")
	}
	generic, err := newTarget("generic://127.0.0.1:9/hook", 1, DefaultSendTimeout, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	if generic.escape != nil {
		t.Error("the generic target changes the text")
	}
}

// hungAtN0 runs a Sender (queue 4, send timeout d) toward a webhook that hangs every request, and
// sends n0, which the endpoint has received (and not answered) when it returns.
func hungAtN0(t *testing.T, d time.Duration) (*webhook, *prometheus.Registry, *Sender) {
	t.Helper()
	hook := newWebhook(t, true)
	reg := prometheus.NewRegistry()
	s, err := New([]string{hook.url("/hung", "")}, reg, klog.Background(), QueueSize(4), SendTimeout(d))
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	s.Notify(Event{Kind: KindCycleStarted, Node: "n0"})
	if r := hook.next(t); r.Body != "node n0: reboot cycle started" {
		t.Fatalf("first request %+v", r)
	}
	return hook, reg, s
}

// kured's --message-template-*: the node's name put in as kured puts it (fmt.Sprintf), for the three
// kinds kured has; the other kinds, and a kind without a template, keep Slipway's message.
func TestTemplates(t *testing.T) {
	s, err := New(nil, nil, klog.Background(), Templates("Draining node %s", "", "Node %s done; 100%% %d"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ev   Event
		want string
	}{
		{Event{Kind: KindCycleStarted, Node: "w-1"}, "Draining node w-1"},
		{Event{Kind: KindRebootGranted, Node: "w-1"}, "node w-1: drained; rebooting"},
		{Event{Kind: KindCycleFinished, Node: "w-1", Took: time.Minute}, "Node w-1 done; 100% %!d(MISSING)"}, // kured's quirks kept
		{Event{Kind: KindStalled, Node: "w-1", Reason: "not-ready"}, "node w-1: stalled (not-ready)"},
	} {
		if got := s.message(c.ev); got != c.want {
			t.Errorf("%s: %q, want %q", c.ev.Kind, got, c.want)
		}
	}
}
