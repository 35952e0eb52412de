package blocker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/redact"
)

// AlertsConfig configures the Prometheus alerts blocker.
type AlertsConfig struct {
	// URL is the Prometheus (or anything serving its /api/v1/alerts, such as Thanos Querier) base
	// URL, e.g. http://prometheus-k8s.monitoring:9090; a path prefix is kept.
	URL string
	// Include: when set, only alerts whose name (label alertname) matches block. Exclude: alerts whose
	// name matches never block. Both unanchored, as kured's --alert-filter-regexp: write ^Name$ to
	// match one name exactly. An alert blocks when it passes both.
	Include, Exclude *regexp.Regexp
	// IncludePending also blocks on alerts still pending (their "for:" not yet elapsed), which is
	// kured's default. Off: only firing alerts block.
	IncludePending bool
	// Require: alert names that must be firing for anything to be admitted (--alert-require), such
	// as kube-prometheus' always-firing Watchdog: an empty answer from a Prometheus that just started,
	// lost its rules or cannot reach Alertmanager's inputs is then no reason to go on. Required alerts
	// never block themselves.
	Require []string
	// Timeout bounds one query (default 5 s); TTL is how long an answer, or a failure, is reused
	// (default 10 s), so that many waiting nodes cost one query.
	Timeout, TTL time.Duration
	// RoundTripper carries the requests (TLS, auth); nil uses the client library's default, which
	// honours the proxy environment variables.
	RoundTripper http.RoundTripper
	// Now is the clock the TTL is measured on (nil: time.Now).
	Now func() time.Time
}

// Alerts blocks every node while Prometheus reports a matching active alert. It asks Prometheus'
// /api/v1/alerts (the alerts its rules hold, with their state) at most once per TTL, and fails
// closed: an unreachable Prometheus, a timeout or a malformed answer blocks, with the error as the
// reason, and is itself reused for the TTL.
type Alerts struct {
	cfg     AlertsConfig
	api     promv1.API
	addr    string   // the URL without its secrets (redact.URL), for reasons
	secrets []string // what of the URL to scrub from the client's errors

	mu     sync.Mutex // held across a query: concurrent checks wait for its answer
	at     time.Time  // when the cached answer was made; zero: none
	cached answer
}

type answer struct {
	blocked bool
	reason  string
}

// NewAlerts checks the configuration and builds the blocker. It makes no request.
func NewAlerts(cfg AlertsConfig) (*Alerts, error) {
	u, err := endpoint(cfg.URL, "prometheus URL")
	if err != nil {
		return nil, err
	}
	for _, name := range cfg.Require {
		if name == "" {
			return nil, errors.New("required alert: empty name")
		}
	}
	queryDefaults(&cfg.Timeout, &cfg.TTL, &cfg.Now)
	secrets := redact.Secrets(u, 0, 3)
	rt := cfg.RoundTripper
	if rt == nil {
		rt = promapi.DefaultRoundTripper
	}
	c, err := promapi.NewClient(promapi.Config{Address: cfg.URL, RoundTripper: boundedAnswers{rt, MaxAnswerBytes}})
	if err != nil {
		return nil, fmt.Errorf("prometheus URL %s: %s", redact.URL(u), redact.Scrub(err.Error(), secrets))
	}
	return &Alerts{cfg: cfg, api: promv1.NewAPI(c), addr: redact.URL(u), secrets: secrets}, nil
}

// endpoint parses the base URL of a Prometheus-compatible API (what names it in errors).
func endpoint(raw, what string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Not repeated: what cannot be parsed cannot be redacted either.
		return nil, fmt.Errorf("%s (%d characters, not shown: it may hold credentials): want http(s)://host[:port][/prefix]", what, len(raw))
	}
	return u, nil
}

// queryDefaults fills a query's timeout (5 s), the answer's reuse (10 s) and the clock.
func queryDefaults(timeout, ttl *time.Duration, now *func() time.Time) {
	if *timeout <= 0 {
		*timeout = 5 * time.Second
	}
	if *ttl <= 0 {
		*ttl = 10 * time.Second
	}
	if *now == nil {
		*now = time.Now
	}
}

// MaxAnswerBytes bounds one answer from Prometheus: the client reads an answer whole, so one huge
// answer (a misconfigured URL serving a large file, a Prometheus with a runaway alert) would take the
// leader's memory, and then the standby's. Over the bound the answer is an error: the fleet is held
// (fail closed), and the reason says why.
const MaxAnswerBytes = 8 << 20

// boundedAnswers cuts every response body off at max bytes with an error.
type boundedAnswers struct {
	rt  http.RoundTripper
	max int64
}

func (b boundedAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(r)
	if err == nil && resp.Body != nil {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: b.max}
	}
	return resp, err
}

type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("answer larger than %d MiB: not read (is --prometheus-url a Prometheus?)", MaxAnswerBytes>>20)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// Required are the alert names that must be firing for anything to be admitted.
func (a *Alerts) Required() []string { return slices.Clone(a.cfg.Require) }

// Name is NameAlerts.
func (a *Alerts) Name() string { return NameAlerts }

// FleetWide: an alert holds every node alike.
func (a *Alerts) FleetWide() bool { return true }

// Check implements Blocker; node is not used and may be nil.
func (a *Alerts) Check(ctx context.Context, _ *corev1.Node) (bool, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	if !a.at.IsZero() && !now.Before(a.at) && now.Sub(a.at) < a.cfg.TTL {
		return a.cached.blocked, a.cached.reason
	}
	qctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	res, err := a.api.Alerts(qctx)
	var ans answer
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller gave up (shutdown): say so, and keep no answer that is not Prometheus'.
		return true, "check cancelled: " + ctx.Err().Error()
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(qctx.Err(), context.DeadlineExceeded)):
		ans = answer{true, fmt.Sprintf("Prometheus at %s did not answer within %s", a.addr, a.cfg.Timeout)}
	case err != nil:
		ans = answer{true, shorten(fmt.Sprintf("cannot read alerts from Prometheus at %s: %s", a.addr, redact.Scrub(err.Error(), a.secrets)))}
	default:
		ans = a.judge(res.Alerts)
	}
	a.at, a.cached = a.cfg.Now(), ans
	return ans.blocked, ans.reason
}

func (a *Alerts) judge(alerts []promv1.Alert) answer {
	if missing := missingAlerts(alerts, a.cfg.Require); len(missing) > 0 {
		return answer{true, shorten(fmt.Sprintf("required %s not firing: %s (Prometheus at %s answered, but without it the alert pipeline is not proven to work)",
			plural(len(missing), "alert"), nameList(missing), a.addr))}
	}
	var others []promv1.Alert
	for _, al := range alerts {
		if !slices.Contains(a.cfg.Require, string(al.Labels[model.AlertNameLabel])) {
			others = append(others, al)
		}
	}
	names := blockingAlerts(others, a.cfg.Include, a.cfg.Exclude, a.cfg.IncludePending)
	if len(names) == 0 {
		return answer{}
	}
	state := "firing"
	if a.cfg.IncludePending {
		state = "firing or pending"
	}
	return answer{true, shorten(fmt.Sprintf("%s %s: %s", plural(len(names), "alert"), state, nameList(names)))}
}

// missingAlerts returns the required names that no firing alert carries, sorted.
func missingAlerts(alerts []promv1.Alert, required []string) []string {
	firing := map[string]bool{}
	for _, al := range alerts {
		if al.State == promv1.AlertStateFiring {
			firing[string(al.Labels[model.AlertNameLabel])] = true
		}
	}
	var out []string
	for _, name := range required {
		if !firing[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// blockingAlerts returns the sorted, distinct names of the alerts that block: active (firing, or
// also pending when includePending), passing include and not matching exclude.
func blockingAlerts(alerts []promv1.Alert, include, exclude *regexp.Regexp, includePending bool) []string {
	seen := map[string]bool{}
	var names []string
	for _, al := range alerts {
		switch al.State {
		case promv1.AlertStateFiring:
		case promv1.AlertStatePending:
			if !includePending {
				continue
			}
		default:
			continue
		}
		name := string(al.Labels[model.AlertNameLabel])
		if include != nil && !include.MatchString(name) {
			continue
		}
		if exclude != nil && exclude.MatchString(name) {
			continue
		}
		if name == "" {
			name = "(alert without alertname)"
		}
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// URL is the Prometheus URL without its secrets (redact.URL), as reasons and the published policy show it.
func (a *Alerts) URL() string { return a.addr }
