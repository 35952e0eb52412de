package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// registered reads the operator's metrics and their labels from docs/reference/metrics.md, which
// TestMetricsReference generates from what the operator registers (and fails on when stale).
func registered(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "reference", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(slipway_[a-z_]+)` \\| ([a-z]+) \\| ([^|]*) \\|")
	out := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				labels = append(labels, l)
			}
		}
		out[m[1]] = labels
		if m[2] == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[m[1]+s] = append(slices.Clone(labels), "le")
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("docs/reference/metrics.md lists only %d metrics", len(out))
	}
	return out
}

type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name, Type, Query string
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// scrapeLabels are the labels Prometheus adds to every scraped series.
var scrapeLabels = []string{"instance", "pod", "job", "namespace"}

// dashboardProblems checks a dashboard's queries against the operator's metrics: every slipway_ metric
// is registered, and every label a query selects on or groups by is one of its labels (or a scrape
// label); ALERTS is Prometheus's own (alertname, alertstate).
func dashboardProblems(raw []byte, metrics map[string][]string) ([]string, []string) {
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return []string{err.Error()}, nil
	}
	var problems, exprs []string
	if d.UID == "" || len(d.Templating.List) == 0 || d.Templating.List[0].Type != "datasource" {
		problems = append(problems, "want a uid and a datasource variable, so it imports into any Grafana")
	}
	metricRef := regexp.MustCompile(`\b(slipway_[a-z_]+|ALERTS)(\{[^}]*\})?`)
	matcher := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	grouping := regexp.MustCompile(`\b(by|without|on|ignoring)\s*\(([^)]*)\)`)
	for _, p := range d.Panels {
		if p.Datasource.UID != "${datasource}" {
			problems = append(problems, fmt.Sprintf("panel %q: datasource %q, want ${datasource}", p.Title, p.Datasource.UID))
		}
		if len(p.Targets) == 0 {
			problems = append(problems, fmt.Sprintf("panel %q has no query", p.Title))
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
			var allowed []string
			for _, m := range metricRef.FindAllStringSubmatch(tg.Expr, -1) {
				labels, ok := metrics[m[1]]
				if m[1] == "ALERTS" {
					labels, ok = []string{"alertname", "alertstate"}, true
				}
				if !ok {
					problems = append(problems, fmt.Sprintf("panel %q: %s is not a metric the operator registers", p.Title, m[1]))
					continue
				}
				labels = append(slices.Clone(labels), scrapeLabels...)
				for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
					if !slices.Contains(labels, l[1]) {
						problems = append(problems, fmt.Sprintf("panel %q: %s has no label %s", p.Title, m[1], l[1]))
					}
				}
				allowed = append(allowed, labels...)
			}
			for _, g := range grouping.FindAllStringSubmatch(tg.Expr, -1) {
				for _, l := range strings.Split(g[2], ",") {
					if l = strings.TrimSpace(l); l != "" && !slices.Contains(allowed, l) {
						problems = append(problems, fmt.Sprintf("panel %q: %s (%s) names no label of its metrics", p.Title, g[1], l))
					}
				}
			}
		}
	}
	return problems, exprs
}

// The Grafana dashboard queries only what the operator exports, by labels its metrics have, and
// every query parses with Prometheus's own parser (promtool, the queries as recording rules). A
// renamed metric or label fails it.
func TestDashboard(t *testing.T) {
	metrics := registered(t)
	raw, err := os.ReadFile(filepath.Join("monitoring", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	problems, exprs := dashboardProblems(raw, metrics)
	for _, p := range problems {
		t.Error(p)
	}
	if len(exprs) < 10 {
		t.Fatalf("%d queries: want the dashboard's panels", len(exprs))
	}
	// The checker itself catches a renamed metric and a misspelt label.
	for _, m := range []struct{ old, new string }{
		{"slipway_operator_version_nodes", "slipway_operator_version_node"},
		{"by (version, phase)", "by (versoin, phase)"},
		{`node_info{state!=\"idle\"}`, `node_info{phase!=\"idle\"}`},
	} {
		if !strings.Contains(string(raw), m.old) {
			t.Fatalf("the dashboard has no %s to change", m.old)
		}
		if p, _ := dashboardProblems([]byte(strings.Replace(string(raw), m.old, m.new, 1)), metrics); len(p) == 0 {
			t.Errorf("the check misses %s → %s", m.old, m.new)
		}
	}
	bin := promtool(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(e)
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runPromtool(bin, dir, "check", "rules", "rules.yaml"); err != nil || !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(exprs))) {
		t.Fatalf("promtool check rules (each query as a recording rule): %v\n%s", err, out)
	}
}

// The monitoring component ships the dashboard as a ConfigMap Grafana's sidecar picks up.
func TestDashboardConfigMap(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("monitoring", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range withMonitoring(t) {
		if !strings.Contains(doc, "name: slipway-grafana-dashboard") {
			continue
		}
		if !strings.Contains(doc, `grafana_dashboard: "1"`) || !strings.Contains(doc, "slipway.json: |") {
			t.Errorf("the dashboard ConfigMap lacks the sidecar's label or the slipway.json key:\n%.400s", doc)
		}
		if !strings.Contains(doc, strings.Split(string(raw), "\n")[1]) {
			t.Error("the ConfigMap does not hold the dashboard")
		}
		return
	}
	t.Fatal("the monitoring component renders no slipway-grafana-dashboard ConfigMap")
}
