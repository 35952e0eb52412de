// Package notify sends the update-operator's notifications (--notify-url) through shoutrrr, the
// library kured users already configure: the same URLs (slack://, teams://, telegram://, ntfy://,
// smtp://, generic://, logger:// and the rest) work here; three of them are sent by Slipway's own
// code (services.go says why).
//
// Nothing in it ever holds up the controller. Notify formats the message and puts it on one bounded
// queue per URL, without waiting; a full queue drops the message and counts it
// (slipway_operator_notifications_dropped_total). Each URL has its own sender goroutine, so a slow or
// unreachable endpoint delays only its own messages. A send that takes longer than the send timeout
// (default 10 s) counts as failed (slipway_operator_notifications_failed_total, as does any error);
// the goroutine then waits for that send to end before the next one, so a hung endpoint costs one
// goroutine, not one per message, and its queue fills and drops instead. generic:// (sent here)
// ends its request at the timeout itself, so its queue moves on; several of shoutrrr's services post
// with http.DefaultClient, which has no timeout of its own, so theirs may wait longer.
//
// The "blocked for longer than N" rule lives in BlockedRule; a Sender has one (Blocked, Unblocked).
//
// URLs carry secrets (tokens, webhook paths): errors and logs name a URL by its position and a
// redacted form (scheme and host), and strip its user info, long path segments and query values from
// whatever text a service returns.
package notify

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/teams"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/redact"
	"github.com/slipway-dev/slipway/operator/admission"
)

// Kinds of Event.
const (
	KindCycleStarted  = "cycle-started"  // a node was admitted into its reboot cycle
	KindRebootGranted = "reboot-granted" // a node was drained and granted its reboot
	KindCycleFinished = "cycle-finished" // a node's reboot was verified (boot ID changed, Ready) and its cycle ended
	KindCycleAborted  = "cycle-aborted"  // a cycle ended without a verified reboot
	KindStalled       = "stalled"        // a node stayed too long in one stage (--reboot-timeout)
	KindBlocked       = "blocked"        // a node waited longer than --notify-blocked-after (see BlockedRule)
	KindFleetPaused   = "fleet-paused"   // the fleet was paused (by --max-failed-reboots, or a person)
)

// Event is one thing worth telling a person.
type Event struct {
	Kind string
	// Node is the node it is about; "" for the fleet.
	Node string
	// Reason: stalled — the stall reason (reboot-timeout, not-ready, ...); blocked — the node's
	// blocked-by value; cycle-aborted and fleet-paused — why.
	Reason string
	// Detail is an optional sentence for a person, appended to the message.
	Detail string
	// Took: cycle-finished — how long the cycle took (admission to verified reboot); stalled and
	// blocked — for how long. 0 leaves it out.
	Took time.Duration
	// Time is when it happened; zero means when Notify was called.
	Time time.Time
}

// Notifier is what the controller calls. Notify never blocks.
type Notifier interface {
	Notify(ev Event)
}

// Message is the text sent for ev: one short line for a person.
func Message(ev Event) string {
	var b strings.Builder
	if ev.Node != "" {
		b.WriteString("node " + ev.Node + ": ")
	}
	took := ""
	if ev.Took > 0 {
		took = Duration(ev.Took)
	}
	switch ev.Kind {
	case KindCycleStarted:
		b.WriteString("reboot cycle started")
		suffix(&b, " (", ev.Detail, ")")
	case KindRebootGranted:
		b.WriteString("drained; rebooting")
		suffix(&b, " (", ev.Detail, ")")
	case KindCycleFinished:
		b.WriteString("reboot finished (boot ID changed, Ready)")
		suffix(&b, " in ", took, "")
		suffix(&b, "; ", ev.Detail, "")
	case KindCycleAborted:
		b.WriteString("reboot cycle aborted without a verified reboot")
		suffix(&b, ": ", ev.Reason, "")
		suffix(&b, "; ", ev.Detail, "")
	case KindStalled:
		b.WriteString("stalled")
		suffix(&b, " (", ev.Reason, ")")
		suffix(&b, " for ", took, "")
		suffix(&b, ": ", ev.Detail, "")
	case KindBlocked:
		b.WriteString("waiting")
		suffix(&b, " for ", took, "")
		suffix(&b, ", blocked by ", ev.Reason, "")
		suffix(&b, " (", ev.Detail, ")")
	case KindFleetPaused:
		b.WriteString("fleet paused")
		suffix(&b, ": ", ev.Reason, "")
		suffix(&b, "; ", ev.Detail, "")
	default:
		b.WriteString(ev.Kind)
		suffix(&b, ": ", ev.Reason, "")
		suffix(&b, " for ", took, "")
		suffix(&b, "; ", ev.Detail, "")
	}
	return cut(b.String(), maxMessage)
}

// maxMessage bounds a message (chat services refuse long ones; a blocker's reason can be long).
const maxMessage = 1000

func suffix(b *strings.Builder, before, s, after string) {
	if s != "" {
		b.WriteString(before + s + after)
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// Duration writes d for a person: 42s, 4m12s, 1h05m (to the minute from an hour on).
func Duration(d time.Duration) string {
	d = d.Round(time.Second)
	if d >= time.Hour {
		d = d.Round(time.Minute)
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// Defaults of the options.
const (
	DefaultQueueSize    = 64
	DefaultSendTimeout  = 10 * time.Second
	DefaultBlockedAfter = time.Hour
)

// DefaultQuietKinds are the blocked-by kinds that never make a `blocked` notification: admission's
// quiet kinds (waiting for the budget, a window or the control-plane order is the plan working; the
// same kinds the example PrometheusRule leaves out).
var DefaultQuietKinds = func() []string {
	var out []string
	for _, k := range admission.QuietKinds {
		out = append(out, string(k))
	}
	return out
}()

type options struct {
	queue        int
	timeout      time.Duration
	blockedAfter time.Duration
	quiet        []string
	templates    map[string]string
}

// Option tunes a Sender.
type Option func(*options)

// QueueSize is how many messages wait per URL before new ones are dropped (default 64).
func QueueSize(n int) Option { return func(o *options) { o.queue = n } }

// SendTimeout is how long one send may take before it counts as failed (default 10 s).
func SendTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// BlockedAfter is --notify-blocked-after: how long a node waits before `blocked` is sent (default
// 1 h); 0 or less sends none.
func BlockedAfter(d time.Duration) Option { return func(o *options) { o.blockedAfter = d } }

// Templates are kured's --message-template-drain, --message-template-reboot and
// --message-template-uncordon: when set, the message of a cycle's start, of its grant and of its
// verified end is the template with the node's name substituted as kured substitutes it
// (fmt.Sprintf(template, node): its %s, e.g. kured's defaults "Draining node %s", "Rebooting node %s",
// "Node %s rebooted & uncordoned successfully!"). "" keeps Slipway's own message for that kind.
func Templates(drain, reboot, uncordon string) Option {
	return func(o *options) {
		o.templates = map[string]string{KindCycleStarted: drain, KindRebootGranted: reboot, KindCycleFinished: uncordon}
	}
}

// QuietKinds replaces DefaultQuietKinds.
func QuietKinds(kinds ...string) Option { return func(o *options) { o.quiet = kinds } }

// Sender delivers Events to every --notify-url. A nil *Sender, or one without URLs, accepts every
// call and sends nothing, so the controller can hold one unconditionally.
type Sender struct {
	targets   []*target
	log       klog.Logger
	timeout   time.Duration
	rule      *BlockedRule
	started   sync.Once
	templates map[string]string

	sent, dropped, failed prometheus.Counter
}

type target struct {
	name    string // redacted, for logs
	secrets []string
	svc     service
	queue   chan queued
	escape  func(string) string // the service's markup escaping (nil: none)
}

type queued struct {
	kind, msg string
}

// New checks every URL (an unknown service or a URL the service refuses is an error naming the URL
// by position and redacted form) and registers the notification metrics on reg (nil: none). Call
// Run to start sending; until then messages wait in the queues.
func New(urls []string, reg prometheus.Registerer, log klog.Logger, opts ...Option) (*Sender, error) {
	o := options{queue: DefaultQueueSize, timeout: DefaultSendTimeout, blockedAfter: DefaultBlockedAfter, quiet: DefaultQuietKinds}
	for _, f := range opts {
		f(&o)
	}
	if o.queue < 1 {
		return nil, fmt.Errorf("notification queue size %d: want at least 1", o.queue)
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("notification send timeout %s: want more than 0", o.timeout)
	}
	s := &Sender{
		log:       log,
		timeout:   o.timeout,
		templates: o.templates,
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slipway_operator_notifications_sent_total", Help: "Notifications delivered, counted once per --notify-url.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slipway_operator_notifications_dropped_total", Help: "Notifications dropped because a --notify-url's queue was full (its endpoint slow, hung or unreachable), counted once per URL.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slipway_operator_notifications_failed_total", Help: "Notification sends that failed or timed out, counted once per --notify-url.",
		}),
	}
	for i, raw := range urls {
		t, err := newTarget(raw, o.queue, o.timeout, log)
		if err != nil {
			return nil, fmt.Errorf("notify URL %d of %d %s", i+1, len(urls), err)
		}
		s.targets = append(s.targets, t)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{s.sent, s.dropped, s.failed} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering notification metrics: %w", err)
			}
		}
	}
	s.rule = NewBlockedRule(s, o.blockedAfter, o.quiet)
	return s, nil
}

// newTarget builds the shoutrrr service of one URL. Its errors begin with the redacted URL.
func newTarget(raw string, queue int, timeout time.Duration, log klog.Logger) (*target, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, errors.New("is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, secrets included
		}
		return nil, fmt.Errorf("is not a URL: %v", err)
	}
	// user info, and query values and path segments of 8 bytes or more (webhook tokens live in paths)
	name, secrets := shortName(u), redact.Secrets(u, 8, 8)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%q: %s", name, redact.Scrub(fmt.Sprintf(format, args...), secrets))
	}
	if u.Scheme == "" {
		return nil, errors.New("has no service: want e.g. slack://, teams://, generic://...")
	}
	scheme, _, custom := strings.Cut(u.Scheme, "+") // generic+https://host/path
	mk, ok := services[scheme]
	if !ok {
		return nil, fail("unknown service %q (known: %s)", scheme, strings.Join(knownServices(), ", "))
	}
	svc := mk()
	if custom {
		c, ok := svc.(customURL)
		if !ok {
			return nil, fail("service %q has no %s+<scheme>:// form", scheme, scheme)
		}
		if u, err = c.GetConfigURLFromCustom(u); err != nil {
			return nil, fail("%v", err)
		}
	}
	if scheme == "generic" {
		// The generic service accepts these and fails on every send; refuse them now.
		if u.Host == "" {
			return nil, fail("no host")
		}
		if t := u.Query().Get("template"); t != "" && !strings.EqualFold(t, "json") {
			return nil, fail("template %q: only json (or none, for the message as plain text)", t)
		}
	}
	level := 4 // the services' own chatter (e.g. the generic service logs response bodies)
	if scheme == "logger" {
		level = 0 // logger:// writes notifications to the operator's log
	}
	switch s := svc.(type) {
	case *genericHook:
		s.timeout = timeout // the whole request, body included: a stalled server does not hold its URL's queue
	case *email:
		s.timeout = timeout // the whole SMTP session
		s.warn = stdLogger{log.WithName("notify").WithValues("target", name), 0, secrets}
	}
	if err := svc.Initialize(u, stdLogger{log.WithName("notify").WithValues("target", name), level, secrets}); err != nil {
		if errors.Is(err, teams.ErrMissingExtraIDComponent) {
			// kured's documented form (teams://group@tenant/altId/groupOwner) is the old Office 365
			// connector webhook, which has no fourth part; the webhooks Teams issues now have one.
			return nil, fail("%v: this is the old Office 365 connector form (three parts, as kured's docs show it); "+
				"Teams' webhook URLs now carry a fourth part: teams://GROUP@TENANT/ALTID/GROUPOWNER/EXTRAID?host=HOST "+
				"(shoutrrr's form of https://HOST/webhookb2/GROUP@TENANT/IncomingWebhook/ALTID/GROUPOWNER/EXTRAID)", err)
		}
		return nil, fail("%v", err)
	}
	return &target{name: name, secrets: secrets, svc: svc, queue: make(chan queued, queue), escape: escaper(scheme)}, nil
}

// shortName names a URL without its secrets: scheme, user info masked, host, and whether there is more.
func shortName(u *url.URL) string {
	s := u.Scheme + "://"
	if u.User != nil {
		s += "***@"
	}
	s += u.Host
	if u.Path != "" && u.Path != "/" || u.Opaque != "" {
		s += "/…"
	}
	if u.RawQuery != "" {
		s += "?…"
	}
	return s
}

// Notify queues ev for every URL and returns at once; a full queue drops it (counted).
func (s *Sender) Notify(ev Event) {
	if s == nil || len(s.targets) == 0 {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	q := queued{kind: ev.Kind, msg: s.message(ev)}
	for _, t := range s.targets {
		select {
		case t.queue <- q:
		default:
			s.dropped.Inc()
			s.log.V(1).Info("notification dropped: queue full (endpoint slow or hung)", "target", t.name, "kind", ev.Kind, "node", ev.Node)
		}
	}
}

// message is ev's text: its kured template, if one is set for its kind, else Message.
func (s *Sender) message(ev Event) string {
	if t := s.templates[ev.Kind]; t != "" && ev.Node != "" {
		return cut(fmt.Sprintf(t, ev.Node), maxMessage) // kured's substitution, its quirks included
	}
	return Message(ev)
}

// Blocked reports that node waits, held by why (its blocked-by value, "<kind>: <detail>"); see
// BlockedRule. Call it on every sync of a waiting node.
func (s *Sender) Blocked(node, why string) {
	if s == nil || len(s.targets) == 0 {
		return
	}
	s.rule.Blocked(node, why)
}

// Unblocked reports that node no longer waits (admitted, no longer needing a reboot, or deleted).
func (s *Sender) Unblocked(node string) {
	if s == nil || len(s.targets) == 0 {
		return
	}
	s.rule.Unblocked(node)
}

// Enabled reports whether there is anywhere to send to.
func (s *Sender) Enabled() bool { return s != nil && len(s.targets) > 0 }

// Targets names the URLs, redacted, for the startup log.
func (s *Sender) Targets() []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, t := range s.targets {
		out = append(out, t.name)
	}
	return out
}

// Run sends until ctx ends; call it once. It returns when ctx ends, without waiting for a send in
// progress (a hung one included).
func (s *Sender) Run(ctx context.Context) {
	if s == nil || len(s.targets) == 0 {
		<-ctx.Done()
		return
	}
	first := false
	s.started.Do(func() { first = true })
	if !first {
		<-ctx.Done()
		return
	}
	var wg sync.WaitGroup
	for _, t := range s.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.work(ctx, t)
		}()
	}
	wg.Wait()
	s.rule.stop()
}

func (s *Sender) work(ctx context.Context, t *target) {
	for {
		var q queued
		select {
		case <-ctx.Done():
			return
		case q = <-t.queue:
		}
		done := make(chan error, 1)
		msg := q.msg
		if t.escape != nil {
			msg = t.escape(msg)
		}
		go func() { done <- t.svc.Send(msg, &types.Params{}) }()
		timeout := time.NewTimer(s.timeout)
		select {
		case err := <-done:
			timeout.Stop()
			if err != nil {
				s.failed.Inc()
				s.log.Info("notification failed", "target", t.name, "kind", q.kind, "error", redact.Scrub(err.Error(), t.secrets))
			} else {
				s.sent.Inc()
				s.log.V(2).Info("notification sent", "target", t.name, "kind", q.kind)
			}
		case <-timeout.C:
			s.failed.Inc()
			s.log.Info("notification timed out; later ones to this URL wait for it (and drop when its queue is full)", "target", t.name, "kind", q.kind, "timeout", s.timeout)
			select {
			case err := <-done:
				if err == nil {
					s.log.Info("notification delivered after its timeout", "target", t.name, "kind", q.kind)
				}
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			timeout.Stop()
			return
		}
	}
}

// stdLogger lets shoutrrr's services log through klog, with the URL's secrets scrubbed from what they
// say (a server's response may echo its webhook path).
type stdLogger struct {
	log     klog.Logger
	level   int
	secrets []string
}

func (l stdLogger) out(s string) { l.log.V(l.level).Info(redact.Scrub(s, l.secrets)) }

func (l stdLogger) Print(v ...any)                 { l.out(fmt.Sprint(v...)) }
func (l stdLogger) Printf(format string, v ...any) { l.out(fmt.Sprintf(format, v...)) }
func (l stdLogger) Println(v ...any)               { l.out(strings.TrimSuffix(fmt.Sprintln(v...), "\n")) }
