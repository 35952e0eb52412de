package deploy

// The example alerts (deploy/monitoring/, a kustomize component) are checked with Prometheus's own
// promtool, from Debian's prometheus package (hack/install-deps.sh): the PrometheusRule's groups are
// extracted into a plain rules file, `promtool check rules` validates it, and `promtool test rules`
// runs testdata/prometheusrule-tests.yaml, which feeds series of two operator replicas and asserts when
// each alert fires and when it does not. Deliberately broken copies of the rules must fail those
// tests, so the tests are known to look at what matters.

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator/admission"
)

// promtool finds promtool, or skips the test saying how to get it.
func promtool(t *testing.T) string {
	t.Helper()
	testenv.NeedRealParts(t, "promtool (Prometheus's rule engine)")
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found: it ships in Debian's prometheus package, which hack/install-deps.sh installs (apt-get install prometheus)")
	}
	return p
}

type promRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroup struct {
	Name  string     `json:"name"`
	Rules []promRule `json:"rules"`
}

// withMonitoring renders deploy/ with the monitoring component and returns its documents.
func withMonitoring(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	base, _ := filepath.Abs(".")
	comp, _ := filepath.Abs("monitoring")
	relBase, _ := filepath.Rel(dir, base)
	relComp, _ := filepath.Rel(dir, comp)
	k := fmt.Sprintf("resources: [%s]\ncomponents: [%s]\n", relBase, relComp)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return strings.Split(kustomize(t, dir), "\n---\n")
}

// renderedRule renders deploy/ with the monitoring component and returns the one PrometheusRule.
func renderedRule(t *testing.T) (namespace string, groups []ruleGroup) {
	t.Helper()
	found := 0
	for _, doc := range withMonitoring(t) {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			Spec struct {
				Groups []ruleGroup `json:"groups"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered document: %v\n%s", err, doc)
		}
		if obj.Kind == "PrometheusRule" {
			found++
			if obj.APIVersion != "monitoring.coreos.com/v1" {
				t.Errorf("PrometheusRule apiVersion %q", obj.APIVersion)
			}
			namespace, groups = obj.Metadata.Namespace, obj.Spec.Groups
		}
	}
	if found != 1 {
		t.Fatalf("deploy/ with components [monitoring] renders %d PrometheusRules, want 1", found)
	}
	return namespace, groups
}

// writeRules writes groups as a plain Prometheus rules file beside a copy of the unit tests.
func writeRules(t *testing.T, dir string, groups []ruleGroup) {
	t.Helper()
	out, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "prometheusrule-tests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
}

func runPromtool(bin, dir string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// The monitoring component's PodMonitor scrapes exactly the operator's pods, on the port its
// container names, in its namespace: what the alerts read exists once the component is applied.
func TestPodMonitorScrapesTheOperator(t *testing.T) {
	var pm struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port string `json:"port"`
				Path string `json:"path"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	var dep appsv1.Deployment
	found := 0
	for _, doc := range withMonitoring(t) {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		switch {
		case head.Kind == "PodMonitor":
			found++
			if err := yaml.Unmarshal([]byte(doc), &pm); err != nil {
				t.Fatal(err)
			}
		case head.Kind == "Deployment" && head.Metadata.Name == "slipway-update-operator":
			if err := yaml.Unmarshal([]byte(doc), &dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if found != 1 || len(pm.Spec.Endpoints) != 1 || pm.Spec.Endpoints[0].Path != "/metrics" {
		t.Fatalf("%d PodMonitors, endpoints %+v", found, pm.Spec.Endpoints)
	}
	if pm.Metadata.Namespace != dep.Namespace {
		t.Errorf("PodMonitor in %q, the operator in %q", pm.Metadata.Namespace, dep.Namespace)
	}
	if len(pm.Spec.Selector.MatchLabels) == 0 || !labels.SelectorFromSet(pm.Spec.Selector.MatchLabels).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("PodMonitor selector %v does not match the operator's pods %v", pm.Spec.Selector.MatchLabels, dep.Spec.Template.Labels)
	}
	ports := map[string]bool{}
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = true
	}
	if !ports[pm.Spec.Endpoints[0].Port] {
		t.Errorf("PodMonitor port %q is not one of the operator's container ports %v", pm.Spec.Endpoints[0].Port, ports)
	}
}

// runbookBase is where every alert's runbook_url points: an entry of docs/troubleshooting.md.
const runbookBase = "https://github.com/slipway-dev/slipway/blob/main/docs/troubleshooting.md#"

var wantAlerts = []string{"SlipwayNodeStalled", "SlipwayNodeRebooting", "SlipwayFleetPaused", "SlipwayBlockedTooLong", "SlipwayRebootPendingTooLong", "SlipwayProofSourceUnreachable", "SlipwayOperatorNoLeader"}

func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	// The default install must not need the Prometheus Operator's CRDs.
	for _, base := range []string{".", "fleetlock"} {
		if strings.Contains(kustomize(t, base), "kind: PrometheusRule") {
			t.Errorf("%s renders a PrometheusRule by default; it belongs in the monitoring component only", base)
		}
	}
	ns, groups := renderedRule(t)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	troubleshooting := strings.Split(string(doc), "\n")
	if ns != "slipway-system" {
		t.Errorf("PrometheusRule namespace %q, want slipway-system", ns)
	}
	var alerts []string
	for _, g := range groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: want a severity label and summary and description annotations", r.Alert)
			}
			// Its runbook is its entry in docs/troubleshooting.md: the anchor GitHub makes of "### <alert>".
			if want := runbookBase + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !slices.Contains(troubleshooting, "### "+r.Alert) {
				t.Errorf("%s: docs/troubleshooting.md has no \"### %s\" for its runbook_url to point at", r.Alert, r.Alert)
			}
		}
	}
	if !slices.Equal(alerts, wantAlerts) {
		t.Errorf("alerts %v, want %v", alerts, wantAlerts)
	}

	// Every metric an expression names is one the operator exports.
	src, err := os.ReadFile(filepath.Join("..", "operator", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	metricName := regexp.MustCompile(`slipway_[a-z_]+`)
	exported := map[string]bool{}
	for _, m := range metricName.FindAllString(string(src), -1) {
		exported[m] = true
	}
	for _, g := range groups {
		for _, r := range g.Rules {
			for _, m := range metricName.FindAllString(r.Expr, -1) {
				if !exported[m] {
					t.Errorf("%s uses %s, which operator/metrics.go does not export", r.Alert, m)
				}
			}
		}
	}

	dir := t.TempDir()
	writeRules(t, dir, groups)
	out, err := runPromtool(bin, dir, "check", "rules", "rules.yaml")
	if err != nil || !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(wantAlerts))) {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests, _ := os.ReadFile(filepath.Join(dir, "tests.yaml"))
	for _, a := range wantAlerts {
		if !strings.Contains(string(tests), "alertname: "+a) {
			t.Errorf("testdata/prometheusrule-tests.yaml never evaluates %s", a)
		}
	}
	if out, err := runPromtool(bin, dir, "test", "rules", "tests.yaml"); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	// Each of these mistakes must make the unit tests fail.
	for _, m := range []struct {
		name, alert, old, new string
	}{
		{"stalled fires at once", "SlipwayNodeStalled", "5m", "0s"},
		{"a replica restart restarts the stall's 5 minutes", "SlipwayNodeStalled", "max without (instance, pod, os_version, state, blocked_by, policy) (slipway_operator_node_info{stalled!=\"\"})", "max without (os_version, state, blocked_by, policy) (slipway_operator_node_info{stalled!=\"\"})"},
		{"nodes not stalled fire too", "SlipwayNodeStalled", `{stalled!=""}`, ""},
		{"the rebooting alert waits", "SlipwayNodeRebooting", "> 0", "> 0 unless on() (vector(time()) < 300)"},
		{"paused group ignored", "SlipwayFleetPaused", "max without (instance, pod) (slipway_operator_fleet_paused)", `max without (instance, pod) (slipway_operator_fleet_paused{group=""})`},
		{"paused fires early", "SlipwayFleetPaused", "2h", "1h"},
		{"waiting on a window counts as blocked", "SlipwayBlockedTooLong", `budget|window|order|settling|canary|version|proof|paused`, `budget|order|settling|canary|version|proof|paused`},
		{"a pause counts as blocked too", "SlipwayBlockedTooLong", `budget|window|order|settling|canary|version|proof|paused`, `budget|window|order|settling|canary|version|proof`},
		{"a canary bake counts as blocked", "SlipwayBlockedTooLong", `budget|window|order|settling|canary|version|proof|paused`, `budget|window|order|settling|version|proof|paused`},
		{"a version its policy holds back counts as blocked", "SlipwayBlockedTooLong", `budget|window|order|settling|canary|version|proof|paused`, `budget|window|order|settling|canary|proof|paused`},
		{"a soak another cluster's proof needs counts as blocked", "SlipwayBlockedTooLong", `budget|window|order|settling|canary|version|proof|paused`, `budget|window|order|settling|canary|version|paused`},
		{"an unreadable proof source never alerts", "SlipwayProofSourceUnreachable", `reason="proof-source"`, `reason="nothing"`},
		{"no leader while nothing is scraped goes unnoticed", "SlipwayOperatorNoLeader", " or absent(slipway_operator_is_leader)", ""},
		{"one replica's 0 fires", "SlipwayOperatorNoLeader", "sum without (instance, pod) (slipway_operator_is_leader) == 0", "min without (instance, pod) (slipway_operator_is_leader) == 0"},
	} {
		t.Run("mutant/"+m.name, func(t *testing.T) {
			broken := slices.Clone(groups)
			changed := false
			for i := range broken {
				broken[i].Rules = slices.Clone(broken[i].Rules)
				for j, r := range broken[i].Rules {
					if r.Alert != m.alert {
						continue
					}
					if strings.Contains(r.Expr, m.old) {
						r.Expr, changed = strings.Replace(r.Expr, m.old, m.new, 1), true
					} else if r.For == m.old {
						r.For, changed = m.new, true
					}
					broken[i].Rules[j] = r
				}
			}
			if !changed {
				t.Fatalf("%s has no %q to change", m.alert, m.old)
			}
			dir := t.TempDir()
			writeRules(t, dir, broken)
			if out, err := runPromtool(bin, dir, "check", "rules", "rules.yaml"); err != nil {
				t.Fatalf("the mutant is not even valid: %v\n%s", err, out)
			}
			if out, err := runPromtool(bin, dir, "test", "rules", "tests.yaml"); err == nil {
				t.Errorf("promtool test rules passes with this mistake:\n%s", out)
			}
		})
	}
}

// The inhibition example holds back node alerts only while SlipwayNodeRebooting fires for the same
// node: its source is that alert (which carries node), it matches on node, and its target is node
// alerts, never Slipway's own. amtool checks it as Alertmanager would, where installed.
func TestInhibitionExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("monitoring", "alertmanager-inhibit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		InhibitRules []struct {
			SourceMatchers []string `json:"source_matchers"`
			TargetMatchers []string `json:"target_matchers"`
			Equal          []string `json:"equal"`
		} `json:"inhibit_rules"`
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.InhibitRules) != 1 {
		t.Fatalf("%d inhibit rules, want 1", len(cfg.InhibitRules))
	}
	r := cfg.InhibitRules[0]
	_, groups := renderedRule(t)
	var source *promRule
	for _, g := range groups {
		for i := range g.Rules {
			if `alertname="`+g.Rules[i].Alert+`"` == strings.Join(r.SourceMatchers, "") {
				source = &g.Rules[i]
			}
		}
	}
	if source == nil || source.Alert != "SlipwayNodeRebooting" || !strings.Contains(source.Expr, "slipway_operator_node_in_cycle") {
		t.Fatalf("source %v: want exactly SlipwayNodeRebooting, the alert of nodes in their cycle", r.SourceMatchers)
	}
	if !slices.Equal(r.Equal, []string{"node"}) {
		t.Errorf("equal %v: want [node] (the rebooting node's alerts only)", r.Equal)
	}
	if m := strings.Join(r.TargetMatchers, " "); !strings.Contains(m, "KubeNodeNotReady") || strings.Contains(m, "Slipway") {
		t.Errorf("targets %s: want node alerts such as KubeNodeNotReady, none of Slipway's", m)
	}
	testenv.NeedRealParts(t, "amtool (Alertmanager's config check)")
	amtool, err := exec.LookPath("amtool")
	if err != nil {
		t.Skip("amtool not found (Debian's prometheus-alertmanager package): the structure above is checked, Alertmanager's own parse is not")
	}
	dir := t.TempDir()
	conf := "route: {receiver: x}\nreceivers: [{name: x}]\n" + string(b)
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(amtool, "check-config", filepath.Join(dir, "alertmanager.yml")).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
}

// deploy/monitoring/kured-compat.yaml records kured's kured_reboot_required{node} with kured's meaning
// (1 from the node's ask until its cycle finished, 0 otherwise, one series per node whatever the
// replicas), and kured's own RebootRequired alert fires on it after 24 hours, not before, across a
// leader change.
func TestKuredCompatRule(t *testing.T) {
	bin := promtool(t)
	b, err := os.ReadFile(filepath.Join("monitoring", "kured-compat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &obj); err != nil || obj.Kind != "PrometheusRule" || len(obj.Spec.Groups) != 1 {
		t.Fatalf("kured-compat.yaml: want one PrometheusRule with one group (%v)", err)
	}
	if strings.Contains(kustomize(t, "."), "kured_reboot_required") {
		t.Error("deploy/ records kured_reboot_required by default; it is opt-in")
	}
	// kured's alert as its README gives it.
	kuredAlert := `groups:
  - name: kured
    rules:
      - alert: RebootRequired
        expr: max(kured_reboot_required) != 0
        for: 24h
        labels: {severity: warning}
        annotations:
          summary: Machine(s) require being rebooted, and the reboot daemon has failed to do so for 24 hours
`
	run := func(groups []map[string]any) (string, error) {
		dir := t.TempDir()
		out, err := yaml.Marshal(map[string]any{"groups": groups})
		if err != nil {
			t.Fatal(err)
		}
		tests, err := os.ReadFile(filepath.Join("testdata", "kured-compat-tests.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string][]byte{"rules.yaml": out, "kured-alert.yaml": []byte(kuredAlert), "tests.yaml": tests} {
			if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := runPromtool(bin, dir, "check", "rules", "rules.yaml"); err != nil {
			t.Fatalf("promtool check rules: %v\n%s", err, out)
		}
		return runPromtool(bin, dir, "test", "rules", "tests.yaml")
	}
	if out, err := run(obj.Spec.Groups); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Each of these mistakes must make the unit tests fail.
	for _, m := range []struct{ name, old, new string }{
		{"nodes in their cycle read 0", `{state!="idle"}`, `{state="needs-reboot"}`},
		{"idle nodes have no series", " or on (node) 0 * max without (instance, pod, os_version, state, blocked_by, stalled, policy) (max_over_time(slipway_operator_node_info[5m]))", ""},
		{"one series per replica", "max without (instance, pod, os_version, state, blocked_by, stalled, policy) (max_over_time(", "max without (os_version, state, blocked_by, stalled, policy) (max_over_time("},
		{"a leader change resets kured's 24h", `max_over_time(slipway_operator_node_info{state!="idle"}[5m])`, `slipway_operator_node_info{state!="idle"}`},
	} {
		t.Run("mutant/"+m.name, func(t *testing.T) {
			g := maps.Clone(obj.Spec.Groups[0])
			rule := maps.Clone(g["rules"].([]any)[0].(map[string]any))
			expr := rule["expr"].(string)
			if !strings.Contains(expr, m.old) {
				t.Fatalf("the rule has no %q to change: %q", m.old, expr)
			}
			rule["expr"] = strings.Replace(expr, m.old, m.new, 1)
			g["rules"] = []any{rule}
			if out, err := run([]map[string]any{g}); err == nil {
				t.Errorf("promtool test rules passes with this mistake:\n%s", out)
			}
		})
	}
}

// SlipwayBlockedTooLong leaves out exactly the kinds the operator itself treats as the plan working
// (admission.QuietKinds: a Normal Waiting Event, no blocked notification) and paused (its own alert):
// a kind made quiet or loud in the code changes the alert with it, or this fails.
func TestBlockedAlertFollowsQuietKinds(t *testing.T) {
	_, groups := renderedRule(t)
	var expr string
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert == "SlipwayBlockedTooLong" {
				expr = r.Expr
			}
		}
	}
	m := regexp.MustCompile(`reason!~"([^"]*)"`).FindStringSubmatch(expr)
	if m == nil {
		t.Fatalf("SlipwayBlockedTooLong's expression %q has no reason!~\"...\" matcher", expr)
	}
	got := strings.Split(m[1], "|")
	want := []string{string(admission.KindPaused)}
	for _, k := range admission.QuietKinds {
		want = append(want, string(k))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("SlipwayBlockedTooLong leaves out reasons %v; admission.QuietKinds and paused are %v", got, want)
	}
}
