package fleetsim

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads a Prometheus text endpoint (token: a bearer token, "" for none).
func scrape(ctx context.Context, url, token string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	return parser.TextToMetricFamilies(resp.Body)
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// Requests are request counts by a "VERB group/resource/subresource" key (API server) or by HTTP
// method (a client's own count).
type Requests map[string]float64

// Sub is r - before, keeping only keys that changed.
func (r Requests) Sub(before Requests) Requests {
	out := Requests{}
	for k, v := range r {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Total sums the counts whose key passes keep (nil: all).
func (r Requests) Total(keep func(string) bool) float64 {
	t := 0.0
	for k, v := range r {
		if keep == nil || keep(k) {
			t += v
		}
	}
	return t
}

// apiserverRequests reads apiserver_request_total for resource requests (non-resource URLs such as
// /metrics, /readyz and discovery are left out), keyed "VERB group/resource/subresource".
func apiserverRequests(fams map[string]*dto.MetricFamily) (Requests, error) {
	fam, ok := fams["apiserver_request_total"]
	if !ok {
		return nil, fmt.Errorf("apiserver_request_total not found")
	}
	out := Requests{}
	for _, m := range fam.Metric {
		l := labels(m)
		if l["resource"] == "" {
			continue
		}
		out[l["verb"]+" "+l["group"]+"/"+l["resource"]+"/"+l["subresource"]] += m.GetCounter().GetValue()
	}
	return out, nil
}

// Mutating keeps the API server's write verbs.
func Mutating(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE":
		return true
	}
	return false
}

// NotBookkeeping leaves out the resources the API server writes for itself all the time (its
// endpoints reconciler and identity leases, ~12 writes/min) and Leases generally: with leader
// election on, the operator renews its Lease every --retry-period (one PUT per 2 s), which an idle
// fleet is not to blame for; that renewal shows in the JSON's by-resource figures.
func NotBookkeeping(key string) bool {
	_, res, _ := strings.Cut(key, " ")
	parts := strings.Split(res, "/")
	if len(parts) >= 2 && (parts[1] == "endpoints" || parts[1] == "leases" || parts[1] == "endpointslices") {
		return false
	}
	return true
}

// clientRequests reads a client-go request counter (method label) such as the operator's
// slipway_operator_kube_api_requests_total.
func clientRequests(fams map[string]*dto.MetricFamily, name string) Requests {
	out := Requests{}
	if fam, ok := fams[name]; ok {
		for _, m := range fam.Metric {
			out[labels(m)["method"]] += m.GetCounter().GetValue()
		}
	}
	return out
}

func gauge(fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	fam, ok := fams[name]
	if !ok || len(fam.Metric) == 0 {
		return 0, false
	}
	m := fam.Metric[0]
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	}
	return 0, false
}

// procCPU is the CPU time a process has used, user and system, in seconds (/proc/PID/stat).
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	cpu, err := parseProcStat(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return cpu, nil
}

// parseProcStat is utime+stime of a /proc/PID/stat line, in seconds.
func parseProcStat(b []byte) (float64, error) {
	// The command name (field 2) is in parentheses and may hold spaces and ")": count from after the
	// last ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected %q", b)
	}
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected %q", b)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64) // field 14
	stime, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q stime %q", f[11], f[12])
	}
	return (utime + stime) / clockTicks, nil
}

// clockTicks is sysconf(_SC_CLK_TCK): 100 on Linux everywhere Go runs (its ABI fixes USER_HZ).
const clockTicks = 100

// ProcMem is a process's resident memory from /proc/PID/status, in KiB: VmHWM (the peak) and VmRSS
// now, which RssAnon (heap, stacks) and RssFile (the mapped binary) split.
type ProcMem struct {
	HWMKiB     int64 `json:"vm_hwm_kib"`
	RSSKiB     int64 `json:"vm_rss_kib"`
	RSSAnonKiB int64 `json:"rss_anon_kib"`
	RSSFileKiB int64 `json:"rss_file_kib"`
}

func procMem(pid int) (ProcMem, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcMem{}, err
	}
	defer f.Close()
	var m ProcMem
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmHWM":
			m.HWMKiB = n
		case "VmRSS":
			m.RSSKiB = n
		case "RssAnon":
			m.RSSAnonKiB = n
		case "RssFile":
			m.RSSFileKiB = n
		}
	}
	return m, sc.Err()
}

func sumGauge(fams map[string]*dto.MetricFamily, name string) float64 {
	t := 0.0
	if fam, ok := fams[name]; ok {
		for _, m := range fam.Metric {
			t += m.GetGauge().GetValue()
		}
	}
	return t
}

// throttle reads the operator's client-side rate limiter histogram, all verbs together.
func throttle(fams map[string]*dto.MetricFamily) Throttle {
	var t Throttle
	fam, ok := fams["slipway_operator_kube_api_rate_limiter_wait_seconds"]
	if !ok {
		return t
	}
	for _, m := range fam.Metric {
		h := m.GetHistogram()
		t.Requests += int(h.GetSampleCount())
		t.WaitS += h.GetSampleSum()
		for _, b := range h.Bucket {
			if b.GetUpperBound() == 1 {
				t.Waited += int(h.GetSampleCount() - b.GetCumulativeCount())
			}
		}
	}
	return t
}

func (t Throttle) sub(before Throttle) Throttle {
	return Throttle{Requests: t.Requests - before.Requests, WaitS: t.WaitS - before.WaitS, Waited: t.Waited - before.Waited}
}
