package kubeclient

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/metrics"
)

// Limits is the client-side rate limit on requests to the API server (client-go's token bucket).
// client-go's own default, 5 per second with bursts of 10, is a choice nobody made for a controller
// that writes a few times per node cycle: at 1,000 nodes it nearly tripled a rolling reboot's time.
type Limits struct {
	QPS   float64
	Burst int
	// Timeout bounds each request but a watch (0: DefaultTimeout).
	Timeout time.Duration
}

// The binaries' defaults, from measurement (docs/performance.md). The operator writes a few
// patches per node step and reads through informers; the agent writes a handful per boot, and
// thousands of agents share one API server, so it keeps client-go's default.
var (
	OperatorLimits = Limits{QPS: 200, Burst: 500, Timeout: DefaultTimeout}
	AgentLimits    = Limits{QPS: 5, Burst: 10, Timeout: DefaultTimeout}
)

// AddFlags adds --kube-api-qps and --kube-api-burst to fs with def as defaults.
func (l *Limits) AddFlags(fs *flag.FlagSet, def Limits) {
	fs.Float64Var(&l.QPS, "kube-api-qps", def.QPS, "requests per second this process may send to the API server on average (client-side limit)")
	fs.IntVar(&l.Burst, "kube-api-burst", def.Burst, "requests this process may send to the API server in a burst above --kube-api-qps")
	fs.DurationVar(&l.Timeout, "kube-api-timeout", def.Timeout, "give up on one API request (not a watch) after this long; the step is retried")
}

// Validate refuses limits client-go would misread: a QPS of 0 or less turns client-go's limiter
// off or makes it refuse to build, a burst below 1 blocks every request.
func (l Limits) Validate() error {
	if !(l.QPS > 0) || l.QPS > 1e6 {
		return fmt.Errorf("--kube-api-qps=%v: must be a positive number of requests per second (at most 1e6)", l.QPS)
	}
	if l.Timeout < 0 {
		return fmt.Errorf("--kube-api-timeout=%s: must not be negative", l.Timeout)
	}
	if l.Burst < 1 || l.Burst > 1e6 {
		return fmt.Errorf("--kube-api-burst=%d: must be between 1 and 1e6", l.Burst)
	}
	return nil
}

// RegisterMetrics makes client-go report every process's requests to reg: how long each request
// waited for the client-side rate limiter (<prefix>_kube_api_rate_limiter_wait_seconds{verb}) and
// how requests ended (<prefix>_kube_api_requests_total{code,method}). client-go accepts this once
// per process; later calls register the collectors but client-go keeps reporting to the first.
func RegisterMetrics(reg prometheus.Registerer, prefix string) {
	wait := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: prefix + "_kube_api_rate_limiter_wait_seconds",
		Help: "Time requests to the API server waited for the client-side rate limiter (--kube-api-qps, --kube-api-burst).",
		// From "not throttled" to "badly throttled": client-go itself logs waits over 1 s.
		Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"verb"})
	results := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prefix + "_kube_api_requests_total",
		Help: "Requests to the API server by HTTP status code (or <error>) and method.",
	}, []string{"code", "method"})
	reg.MustRegister(wait, results)
	metrics.Register(metrics.RegisterOpts{
		RateLimiterLatency: waitMetric{wait},
		RequestResult:      resultMetric{results},
	})
}

type waitMetric struct{ h *prometheus.HistogramVec }

func (w waitMetric) Observe(_ context.Context, verb string, _ url.URL, d time.Duration) {
	w.h.WithLabelValues(verb).Observe(d.Seconds())
}

type resultMetric struct{ c *prometheus.CounterVec }

func (r resultMetric) Increment(_ context.Context, code, method, _ string) {
	r.c.WithLabelValues(code, method).Inc()
}
