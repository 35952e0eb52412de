package blocker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/slipway-dev/slipway/internal/redact"
)

// ProofSourceConfig is where another cluster's proof is read: a Prometheus-compatible query endpoint
// (Prometheus, Thanos Querier, Mimir) that scrapes that cluster's update-operator
// (slipway_version_* series). The URL and the credentials are the operator's own (flags), never a
// RebootPolicy's: a person who may edit a policy must not be able to send the operator's token to a
// server of their choosing.
type ProofSourceConfig struct {
	URL string
	// BearerTokenFile is read at every query (a mounted Secret's rotation is seen); "" none.
	BearerTokenFile string
	// CAFile: PEM certificates to trust for https instead of the system's ("" the system's).
	CAFile string
	// Timeout bounds one query (default 5 s); TTL is how long an answer (or a failure) per version
	// and selector is reused (default 10 s).
	Timeout, TTL time.Duration
	Now          func() time.Time
}

// ProofSource asks one query endpoint for other clusters' proof of OS versions. Safe for concurrent
// use; answers are cached per (version, selector) for TTL.
type ProofSource struct {
	cfg     ProofSourceConfig
	api     promv1.API
	addr    string
	secrets []string

	mu    sync.Mutex
	cache map[string]cachedProof
}

type cachedProof struct {
	at     time.Time
	series []ProofSeries
	err    error
}

// ProofSeries is one source's (one matching set of labels') proof of a version, as its
// slipway_version_* series say.
type ProofSeries struct {
	Labels      string // the series' identifying labels, for reasons
	Finished    float64
	HasFinished bool
	Halted      bool
	ProvenSince time.Time // zero: no series (not proven there)
}

// NewProofSource checks the configuration and builds the source. It makes no request; the CA file is
// read now (a bad one is a start-up error), the token file at every query.
func NewProofSource(cfg ProofSourceConfig) (*ProofSource, error) {
	u, err := endpoint(cfg.URL, "proof URL")
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, errors.New("proof URL: credentials in the URL are refused (the URL is published in the fleet's status); use --proof-bearer-token-file")
	}
	if cfg.BearerTokenFile != "" && u.Scheme != "https" {
		return nil, errors.New("proof URL: a bearer token is sent only over https (anyone on a plain-http path would read it)")
	}
	queryDefaults(&cfg.Timeout, &cfg.TTL, &cfg.Now)
	tr := promapi.DefaultRoundTripper.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("proof CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("proof CA file %s: no PEM certificate in it", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = tr
	if cfg.BearerTokenFile != "" {
		if _, err := os.Stat(cfg.BearerTokenFile); err != nil {
			return nil, fmt.Errorf("proof bearer token file: %w", err)
		}
		rt = bearerFile{rt, cfg.BearerTokenFile, u.Host}
	}
	secrets := redact.Secrets(u, 0, 3)
	c, err := promapi.NewClient(promapi.Config{Address: cfg.URL, RoundTripper: boundedAnswers{rt, MaxAnswerBytes}})
	if err != nil {
		return nil, fmt.Errorf("proof URL %s: %s", redact.URL(u), redact.Scrub(err.Error(), secrets))
	}
	return &ProofSource{cfg: cfg, api: promv1.NewAPI(c), addr: redact.URL(u), secrets: secrets, cache: map[string]cachedProof{}}, nil
}

// shared holds one ProofSource per endpoint and credentials: every pool's gate asks through it, so one
// answer per version and selector serves them all for its TTL.
var sharedSources sync.Map

// SharedProofSource is the ProofSource for cfg's URL, token file and CA file, made on first use.
func SharedProofSource(cfg ProofSourceConfig) (*ProofSource, error) {
	key := cfg.URL + "\x00" + cfg.BearerTokenFile + "\x00" + cfg.CAFile
	if s, ok := sharedSources.Load(key); ok {
		return s.(*ProofSource), nil
	}
	s, err := NewProofSource(cfg)
	if err != nil {
		return nil, err
	}
	actual, _ := sharedSources.LoadOrStore(key, s)
	return actual.(*ProofSource), nil
}

// bearerFile adds "Authorization: Bearer <the file's content>" to every request to host, and to no
// other (a redirect elsewhere gets no token).
type bearerFile struct {
	rt   http.RoundTripper
	path string
	host string
}

func (b bearerFile) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != b.host {
		return b.rt.RoundTrip(r)
	}
	tok, err := os.ReadFile(b.path)
	if err != nil {
		return nil, fmt.Errorf("reading the bearer token: %w", err)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	return b.rt.RoundTrip(r)
}

// matcher is one PromQL label matcher: name, operator, double-quoted value.
var matcher = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=|!=|=~|!~)\s*"((?:[^"\\]|\\.)*)"\s*$`)

// CheckSelector checks a proof selector: PromQL equality matchers separated by commas
// (cluster="staging",region="eu"), at least one, none on __name__ or version (the gate sets those).
// Only equality: the selector names one cluster. A regular expression or a negation could match several
// clusters, and a cluster that never ran a version has no series to say so: the gate could not tell it
// from one that is not there, and would judge by the others alone.
func CheckSelector(sel string) error {
	if strings.TrimSpace(sel) == "" {
		return errors.New("selector is empty: name the cluster whose proof counts, e.g. cluster=\"staging\"")
	}
	for _, part := range splitMatchers(sel) {
		m := matcher.FindStringSubmatch(part)
		if m == nil {
			return fmt.Errorf("selector %q: %q is not a label matcher (name=\"value\", !=, =~, !~)", sel, part)
		}
		if m[1] == "__name__" || m[1] == "version" || m[1] == "result" {
			return fmt.Errorf("selector %q: %s is set by the gate", sel, m[1])
		}
		if m[2] != "=" {
			return fmt.Errorf("selector %q: %s%s: only name=\"value\" matchers, naming one cluster (a cluster without the version has no series, so a selector matching several would judge by those that have one)", sel, m[1], m[2])
		}
	}
	return nil
}

// splitMatchers splits at commas outside double quotes.
func splitMatchers(sel string) []string {
	var out []string
	var cur strings.Builder
	quoted, escaped := false, false
	for _, r := range sel {
		switch {
		case escaped:
			escaped = false
		case r == '\\' && quoted:
			escaped = true
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(out, cur.String())
}

// Series asks for the proof of version under selector (cached for TTL). An error means no answer
// could be had: the caller holds (fail closed).
func (s *ProofSource) Series(ctx context.Context, version, selector string) ([]ProofSeries, error) {
	key := version + "\x00" + selector
	s.mu.Lock()
	if c, ok := s.cache[key]; ok && s.cfg.Now().Sub(c.at) < s.cfg.TTL && !s.cfg.Now().Before(c.at) {
		s.mu.Unlock()
		return c.series, c.err
	}
	s.mu.Unlock()
	series, err := s.query(ctx, version, selector)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("check cancelled: %w", ctx.Err())
	}
	s.mu.Lock()
	s.cache[key] = cachedProof{at: s.cfg.Now(), series: series, err: err}
	if len(s.cache) > 1024 {
		for k, c := range s.cache { // drop what has expired; versions come and go
			if s.cfg.Now().Sub(c.at) >= s.cfg.TTL {
				delete(s.cache, k)
			}
		}
	}
	s.mu.Unlock()
	return series, err
}

func (s *ProofSource) query(ctx context.Context, version, selector string) ([]ProofSeries, error) {
	q := fmt.Sprintf(`{__name__=~"slipway_version_(cycles|halted|proven_since_seconds)",version=%q,%s}`, version, selector)
	qctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	val, warnings, err := s.api.Query(qctx, q, s.cfg.Now())
	switch {
	case err != nil && errors.Is(qctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%s did not answer within %s", s.addr, s.cfg.Timeout)
	case err != nil:
		return nil, errors.New(shorten(fmt.Sprintf("cannot query %s: %s", s.addr, redact.Scrub(err.Error(), s.secrets))))
	}
	if len(warnings) > 0 {
		// A partial answer (a store down behind Thanos or Mimir) may lack the series that hold: fail closed.
		return nil, errors.New(shorten(fmt.Sprintf("%s answered with warnings (a partial answer is no proof): %s", s.addr, strings.Join(warnings, "; "))))
	}
	vec, ok := val.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("%s answered a %s, not a vector", s.addr, val.Type())
	}
	by := map[string]*ProofSeries{}
	var order []string
	for _, smp := range vec {
		m := smp.Metric.Clone()
		name, result := string(m[model.MetricNameLabel]), string(m["result"])
		delete(m, model.MetricNameLabel)
		delete(m, "result")
		id := m.String()
		p := by[id]
		if p == nil {
			p = &ProofSeries{Labels: id}
			by[id] = p
			order = append(order, id)
		}
		v := float64(smp.Value)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s answered %v for %s", s.addr, v, name)
		}
		switch {
		case name == "slipway_version_cycles" && result == "finished":
			p.Finished, p.HasFinished = v, true
		case name == "slipway_version_halted":
			p.Halted = p.Halted || v != 0
		case name == "slipway_version_proven_since_seconds":
			t := time.Unix(int64(v), 0).UTC()
			if v <= 0 || t.After(s.cfg.Now().Add(5*time.Minute)) {
				return nil, fmt.Errorf("%s answered %v for %s: not a time this side of now", s.addr, v, name)
			}
			p.ProvenSince = t
		}
	}
	out := make([]ProofSeries, 0, len(order))
	for _, id := range order {
		out = append(out, *by[id])
	}
	return out, nil
}

// ProofRule is what a pool requires of another cluster's proof of a version before its nodes reboot
// into it: the selector naming that cluster's series, how many cycles must have finished there, and how
// long the version must have been proven there (the soak).
type ProofRule struct {
	Selector  string
	MinCycles int
	Soak      time.Duration
}

// JudgeProof decides from series (every series the selector matched) whether version may be rebooted
// into at now. Every matching source must have proved it (several clusters matched: the least proven
// decides): a halt anywhere holds; fewer finished cycles than MinCycles holds; not proven holds; proven
// less than Soak ago holds until the soak ends (retry).
func JudgeProof(series []ProofSeries, r ProofRule, version string, now time.Time) (ok bool, why string, retry time.Duration) {
	src := "{" + r.Selector + "}"
	if len(series) == 0 {
		return false, fmt.Sprintf("%s: %s has no proof of it (never rebooted into it there, or the selector matches no cluster)", version, src), 0
	}
	var latest time.Time
	for _, s := range series {
		switch {
		case s.Halted:
			return false, fmt.Sprintf("%s: halted at %s", version, s.Labels), 0
		case !s.HasFinished || s.Finished < float64(r.MinCycles):
			return false, fmt.Sprintf("%s: %s finished %d of the %d cycles required", version, s.Labels, int(s.Finished), r.MinCycles), 0
		case s.ProvenSince.IsZero():
			return false, fmt.Sprintf("%s: not proven at %s yet (its canaries or their bake, or a failure since its resume)", version, s.Labels), 0
		}
		if s.ProvenSince.After(latest) {
			latest = s.ProvenSince
		}
	}
	if end := latest.Add(r.Soak); now.Before(end) {
		return false, fmt.Sprintf("%s: %s proved it %s ago, soak %s (until %s)", version, src, now.Sub(latest).Round(time.Second), r.Soak, end.UTC().Format(time.RFC3339)),
			end.Sub(now) + 10*time.Millisecond
	}
	return true, "", 0
}

// Proof is a pool's gate on another cluster's proof (admission.ProofCheck).
type Proof struct {
	Source *ProofSource
	Rule   ProofRule
}

// Proven reports whether version may be rebooted into now. Fail closed: when the source gives no
// answer, unreachable is set and the version is held.
func (p *Proof) Proven(ctx context.Context, version string, now time.Time) (ok bool, why string, retry time.Duration, unreachable bool) {
	series, err := p.Source.Series(ctx, version, p.Rule.Selector)
	if err != nil {
		return false, fmt.Sprintf("%s: no answer from the proof source (%s): held until it answers", version, err), 0, true
	}
	ok, why, retry = JudgeProof(series, p.Rule, version, now)
	return ok, why, retry, false
}
