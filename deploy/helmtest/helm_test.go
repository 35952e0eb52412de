package helmtest

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "../helm/slipway"
	deployDir = ".."
	namespace = "slipway-system"

	operatorKey     = "apps/v1 Deployment slipway-system/slipway-update-operator"
	agentKey        = "apps/v1 DaemonSet slipway-system/slipway-update-agent"
	pdbKey          = "policy/v1 PodDisruptionBudget slipway-system/slipway-update-operator"
	nsKey           = "v1 Namespace slipway-system"
	vapKey          = "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy slipway-update-agent"
	vapbKey         = "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding slipway-update-agent"
	fenceKey        = "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy slipway-admission-fence"
	fenceBindingKey = "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding slipway-admission-fence"
	opVAPKey        = "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy slipway-update-operator"
	serviceKey      = "v1 Service slipway-system/slipway-fleetlock"
	netpolKey       = "networking.k8s.io/v1 NetworkPolicy slipway-system/slipway-fleetlock-central"
	flDSKey         = "apps/v1 DaemonSet slipway-system/slipway-fleetlock"
	centralKey      = "apps/v1 Deployment slipway-system/slipway-fleetlock-central"
	defaultImage    = "ghcr.io/slipway-dev/slipway:v0.3.0"
)

// kubeVersion is the Kubernetes version the chart is rendered and linted for: the control plane the
// project's tests run (`helm template` assumes its client-go's, Helm's test builds 1.20).
var kubeVersion = func() *common.KubeVersion {
	v, err := common.ParseKubeVersion("v1.35.4")
	if err != nil {
		panic(err)
	}
	return v
}()

// object is one rendered Kubernetes object as parsed YAML.
type object = map[string]any

// objects are rendered objects by key (see keyOf).
type objects = map[string]object

// replaceStrings replaces old with new in every string value under v.
func replaceStrings(v any, old, new string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok {
				x[k] = strings.ReplaceAll(s, old, new)
				continue
			}
			replaceStrings(e, old, new)
		}
	case []any:
		for i, e := range x {
			if s, ok := e.(string); ok {
				x[i] = strings.ReplaceAll(s, old, new)
				continue
			}
			replaceStrings(e, old, new)
		}
	}
}

// keyOf names an object: apiVersion, kind and namespace/name (name alone when cluster-scoped).
func keyOf(o object) string {
	md, _ := o["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if ns, _ := md["namespace"].(string); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%v %v %s", o["apiVersion"], o["kind"], name)
}

// parse reads a multi-document manifest; both renderers' output goes through it, so both sides are
// compared as the same Go types.
func parse(t *testing.T, manifest string) objects {
	t.Helper()
	nodes, err := (&kio.ByteReader{Reader: strings.NewReader(manifest), OmitReaderAnnotations: true}).Read()
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, manifest)
	}
	out := objects{}
	for _, n := range nodes {
		m, err := n.Map()
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			continue
		}
		k := keyOf(m)
		if _, dup := out[k]; dup {
			t.Fatalf("two objects %s", k)
		}
		out[k] = m
	}
	return out
}

// rekey re-indexes objects after edits that may have changed a name or namespace.
func rekey(in objects) objects {
	out := objects{}
	for _, o := range in {
		out[keyOf(o)] = o
	}
	return out
}

// kustomize renders dir with kustomize's API, as `kubectl kustomize dir` does.
func kustomize(t *testing.T, dir string) objects {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	y, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, string(y))
}

// helmTemplate renders the chart as `helm template slipway deploy/helm/slipway --namespace ns` does,
// with vals as given by --values (merged over values.yaml, checked against values.schema.json).
func helmTemplate(vals map[string]any, ns string) (string, error) {
	return render(vals, ns, kubeVersion, false)
}

// render is helmTemplate for Kubernetes kv, optionally with --skip-schema-validation.
func render(vals map[string]any, ns string, kv *common.KubeVersion, skipSchema bool) (string, error) {
	rel, err := renderRelease(vals, ns, kv, skipSchema)
	if err != nil {
		return "", err
	}
	out := rel.Manifest
	for _, h := range rel.Hooks { // the RebootPolicies of .Values.policies: compared like the rest
		out += "\n---\n" + h.Manifest
	}
	return out, nil
}

// renderRelease is render's whole release (its NOTES included).
func renderRelease(vals map[string]any, ns string, kv *common.KubeVersion, skipSchema bool) (*release.Release, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = "slipway"
	install.Namespace = ns
	install.Replace = true
	install.KubeVersion = kv
	install.SkipSchemaValidation = skipSchema
	r, err := install.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("unexpected release type %T", r)
	}
	for _, h := range rel.Hooks {
		if h.Kind != "RebootPolicy" {
			return nil, fmt.Errorf("the chart has a %s hook (%s); kustomize has none, and only .Values.policies may be hooks", h.Kind, h.Name)
		}
	}
	return rel, nil
}

// With the agent policy off (acknowledged), NOTES says loudly what that grants; with it on, nothing.
func TestNotesWarnWithoutTheAgentPolicy(t *testing.T) {
	for _, c := range []struct {
		vals map[string]any
		warn bool
	}{
		{nil, false},
		{map[string]any{"agentPolicy": map[string]any{"enabled": false, "acknowledgeUnconfinedAgents": true}}, true},
	} {
		rel, err := renderRelease(c.vals, namespace, kubeVersion, false)
		if err != nil {
			t.Fatal(err)
		}
		notes := ""
		if rel.Info != nil {
			notes = rel.Info.Notes
		}
		if got := strings.Contains(notes, "WARNING: agentPolicy.enabled=false") && strings.Contains(notes, "patch ANY Node"); got != c.warn {
			t.Errorf("values %v: NOTES warn %v, want %v:\n%s", c.vals, got, c.warn, notes)
		}
		if !strings.Contains(notes, "kubectl slipway status") {
			t.Errorf("NOTES without the first command:\n%s", notes)
		}
	}
	// A fresh install starts paused (the default): NOTES says so and how to resume; without it, not.
	for _, paused := range []bool{true, false} {
		rel, err := renderRelease(map[string]any{"operator": map[string]any{"startPaused": paused}}, namespace, kubeVersion, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(rel.Info.Notes, "starts PAUSED") && strings.Contains(rel.Info.Notes, "kubectl slipway resume -n "+namespace); got != paused {
			t.Errorf("startPaused=%v: NOTES tell to resume: %v\n%s", paused, got, rel.Info.Notes)
		}
	}
}

func helm(t *testing.T, vals map[string]any) objects {
	t.Helper()
	return helmIn(t, vals, namespace)
}

func helmIn(t *testing.T, vals map[string]any, ns string) objects {
	t.Helper()
	manifest, err := helmTemplate(vals, ns)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return keptNamespace(t, parse(t, manifest))
}

// keptNamespace checks that a Namespace the chart creates is kept by `helm uninstall`
// (helm.sh/resource-policy: keep) and takes that annotation out, the one way the chart's Namespace
// differs from kustomize's.
func keptNamespace(t *testing.T, objs objects) objects {
	t.Helper()
	for _, o := range objs {
		if o["kind"] != "Namespace" {
			continue
		}
		md := o["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if ann["helm.sh/resource-policy"] != "keep" {
			t.Errorf("the chart's Namespace is deleted by helm uninstall: annotations %v", ann)
		}
		delete(ann, "helm.sh/resource-policy")
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
	return objs
}

// differences lists every way got differs from want: objects only in one, and per object the diff.
func differences(want, got objects) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			out = append(out, "missing "+k)
			continue
		}
		if d := cmp.Diff(want[k], g); d != "" {
			out = append(out, fmt.Sprintf("differs %s (-want +got):\n%s", k, d))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			out = append(out, "extra "+k)
		}
	}
	return out
}

func assertSame(t *testing.T, want, got objects) {
	t.Helper()
	for _, d := range differences(want, got) {
		t.Error(d)
	}
}

// The default values render the objects of `kubectl kustomize deploy/`, exactly.
func TestDefaultsEqualKustomize(t *testing.T) {
	want := kustomize(t, deployDir)
	if len(want) < 12 {
		t.Fatalf("kustomize rendered only %d objects: %v", len(want), slices.Sorted(maps.Keys(want)))
	}
	got := helm(t, nil)
	assertSame(t, want, got)
	t.Logf("%d objects, equal: %v", len(got), slices.Sorted(maps.Keys(got)))
}

// fleetlock.enabled renders the objects of `kubectl kustomize deploy/fleetlock/`, exactly.
func TestFleetLockEqualsOverlay(t *testing.T) {
	want := kustomize(t, filepath.Join(deployDir, "fleetlock"))
	if _, ok := want[flDSKey]; !ok {
		t.Fatalf("the overlay no longer renders %s", flDSKey)
	}
	assertSame(t, want, helm(t, map[string]any{"fleetlock": map[string]any{"enabled": true}}))
}

// fleetlock.central.enabled renders the objects of `kubectl kustomize deploy/fleetlock-central/`, exactly.
func TestFleetLockCentralEqualsOverlay(t *testing.T) {
	want := kustomize(t, filepath.Join(deployDir, "fleetlock-central"))
	for _, k := range []string{centralKey, serviceKey, netpolKey} {
		if _, ok := want[k]; !ok {
			t.Fatalf("the overlay no longer renders %s", k)
		}
	}
	assertSame(t, want, helm(t, map[string]any{"fleetlock": map[string]any{"central": map[string]any{"enabled": true}}}))
}

// agent.rebootRequiredFile renders deploy/ with the deploy/reboot-required-file component, exactly.
func TestRebootRequiredFileEqualsComponent(t *testing.T) {
	want := withComponent(t, "reboot-required-file", nil)
	if d := differences(kustomize(t, deployDir), want); len(d) != 1 {
		t.Fatalf("the component should change the agent DaemonSet only: %v", d)
	}
	assertSame(t, want, helm(t, map[string]any{"agent": map[string]any{"rebootRequiredFile": true}}))
}

// monitoring.*.enabled renders deploy/ with the deploy/monitoring component (PodMonitor, PrometheusRule,
// the Grafana dashboard's ConfigMap), exactly; additionalLabels add to the objects' labels.
func TestMonitoringEqualsComponent(t *testing.T) {
	want := withComponent(t, "monitoring", nil)
	const ruleKey, pmKey, dashKey = "monitoring.coreos.com/v1 PrometheusRule slipway-system/slipway",
		"monitoring.coreos.com/v1 PodMonitor slipway-system/slipway-update-operator", "v1 ConfigMap slipway-system/slipway-grafana-dashboard"
	for _, key := range []string{ruleKey, pmKey, dashKey} {
		if _, ok := want[key]; !ok {
			t.Fatalf("the component no longer renders %s: %v", key, slices.Sorted(maps.Keys(want)))
		}
	}
	on := map[string]any{"enabled": true}
	assertSame(t, want, helm(t, map[string]any{"monitoring": map[string]any{"podMonitor": on, "prometheusRule": on, "grafanaDashboard": on}}))

	got := helm(t, map[string]any{"monitoring": map[string]any{
		"podMonitor":       map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "kps"}},
		"prometheusRule":   map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "kps"}},
		"grafanaDashboard": map[string]any{"enabled": true, "namespace": "monitoring", "labels": map[string]any{"dashboards": "on"}}}})
	for _, key := range []string{ruleKey, pmKey} {
		labels, _ := got[key]["metadata"].(map[string]any)["labels"].(map[string]any)
		if labels["release"] != "kps" || labels["app.kubernetes.io/part-of"] != "slipway" {
			t.Errorf("%s labels %v: want release=kps added to its own", key, labels)
		}
	}
	dash, ok := got["v1 ConfigMap monitoring/slipway-grafana-dashboard"]
	if !ok {
		t.Fatalf("grafanaDashboard.namespace not honoured: %v", slices.Sorted(maps.Keys(got)))
	}
	if labels := dash["metadata"].(map[string]any)["labels"].(map[string]any); labels["dashboards"] != "on" || labels["app.kubernetes.io/part-of"] != "slipway" {
		t.Errorf("dashboard labels %v: want the values' labels (Helm merges them into the default's) and part-of", labels)
	}
}

// kubectlBin is the project's kubectl (hack/build-controlplane.sh builds and caches it; `make test`
// does that first), or $SLIPWAY_CONTROLPLANE_DIR/kubectl.
func kubectlBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SLIPWAY_CONTROLPLANE_DIR")
	if dir == "" {
		cmd := exec.Command(filepath.Join(deployDir, "..", "hack", "build-controlplane.sh"), "kubectl")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/build-controlplane.sh kubectl: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		dir = lines[len(lines)-1]
	}
	return filepath.Join(dir, "kubectl")
}

// clusterScoped are the kinds of cluster-scoped objects deploy/ and the chart hold.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

// The chart also renders what the `kubectl kustomize` of the project's kubectl (1.35.4, kustomize
// v5.7.1, api v0.20.1) renders, but for one thing: that kustomize does not know the admission policy
// kinds to be cluster-scoped and gives them the namespace of deploy/base (the API server drops a
// cluster-scoped object's namespace; `kubectl diff` shows nothing). Only that is forgiven, and only on
// cluster-scoped kinds; every object it is forgiven on is logged.
func TestKubectlKustomize(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs the project's kubectl (hack/build-controlplane.sh)")
	}
	kubectl := kubectlBin(t)
	for dir, vals := range map[string]map[string]any{
		".":                 nil,
		"fleetlock":         {"fleetlock": map[string]any{"enabled": true}},
		"fleetlock-central": {"fleetlock": map[string]any{"central": map[string]any{"enabled": true}}},
	} {
		out, err := exec.Command(kubectl, "kustomize", filepath.Join(deployDir, dir)).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		want := parse(t, string(out))
		for k, o := range want {
			md := o["metadata"].(map[string]any)
			if _, ok := md["namespace"]; ok && clusterScoped[o["kind"].(string)] {
				t.Logf("kubectl kustomize %s: namespace %v on cluster-scoped %s, dropped", dir, md["namespace"], k)
				delete(md, "namespace")
			}
		}
		assertSame(t, rekey(want), helm(t, vals))
	}
}

// The comparison itself sees differences: the default chart is not the fleetlock overlay, and a
// changed flag is one differing object.
func TestComparisonDetectsDifferences(t *testing.T) {
	d := differences(kustomize(t, filepath.Join(deployDir, "fleetlock")), helm(t, nil))
	agentDiffers := slices.IndexFunc(d, func(s string) bool { return strings.HasPrefix(s, "differs "+agentKey) })
	if len(d) != 7 || agentDiffers < 0 || !strings.Contains(d[agentDiffers], `"affinity"`) || !slices.Contains(d, "missing "+flDSKey) {
		t.Errorf("default chart vs fleetlock overlay: want the agent DaemonSet differing and the FleetLock DaemonSet and its ServiceAccount, RBAC missing, got %d:\n%s", len(d), strings.Join(d, "\n"))
	}
	d = differences(kustomize(t, deployDir), helm(t, map[string]any{"operator": map[string]any{"maxUnavailable": 2}}))
	if len(d) != 1 || !strings.Contains(d[0], "--max-unavailable=2") {
		t.Errorf("maxUnavailable=2 vs deploy/: want one differing Deployment, got:\n%s", strings.Join(d, "\n"))
	}
}

func podSpec(o object) map[string]any {
	return o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
}

func container(o object) map[string]any {
	return podSpec(o)["containers"].([]any)[0].(map[string]any)
}

// appendArgs appends flags to the first container's args.
func appendArgs(o object, args ...string) {
	c := container(o)
	for _, a := range args {
		c["args"] = append(c["args"].([]any), a)
	}
}

// Each value changes exactly what it should: the default render edited by hand equals the render
// with the value set.
func TestValues(t *testing.T) {
	toleration := map[string]any{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}
	for _, tc := range []struct {
		name string
		vals string
		ns   string
		edit func(*testing.T, objects)
	}{{
		name: "image",
		vals: `image: {repository: registry.example.com/ops/slipway, tag: v9.8.7, pullPolicy: Always}`,
		edit: func(t *testing.T, o objects) {
			for _, k := range []string{operatorKey, agentKey} {
				container(o[k])["image"] = "registry.example.com/ops/slipway:v9.8.7"
				container(o[k])["imagePullPolicy"] = "Always"
			}
		},
	}, {
		name: "image digest",
		vals: `image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`,
		edit: func(t *testing.T, o objects) {
			for _, k := range []string{operatorKey, agentKey} {
				container(o[k])["image"] = defaultImage + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			}
		},
	}, {
		name: "policies",
		vals: `policies: [{name: gpu, spec: {nodeSelector: {matchLabels: {pool: gpu}}, maxUnavailable: 1, windows: ["Sun 02:00-06:00"]}}]`,
		edit: func(t *testing.T, o objects) {
			o["update.slipway.dev/v1alpha1 RebootPolicy gpu"] = map[string]any{
				"apiVersion": "update.slipway.dev/v1alpha1", "kind": "RebootPolicy",
				"metadata": map[string]any{"name": "gpu", "annotations": map[string]any{
					"helm.sh/hook": "post-install,post-upgrade", "helm.sh/hook-delete-policy": "before-hook-creation"}},
				"spec": map[string]any{"nodeSelector": map[string]any{"matchLabels": map[string]any{"pool": "gpu"}}, "maxUnavailable": 1,
					"windows": []any{"Sun 02:00-06:00"}},
			}
		},
	}, {
		name: "imagePullSecrets",
		vals: `imagePullSecrets: [{name: regcred}]`,
		edit: func(t *testing.T, o objects) {
			for _, k := range []string{operatorKey, agentKey} {
				podSpec(o[k])["imagePullSecrets"] = []any{map[string]any{"name": "regcred"}}
			}
		},
	}, {
		name: "tolerations",
		vals: `{operator: {tolerations: [{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]},
		        agent: {tolerations: [{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]}}`,
		edit: func(t *testing.T, o objects) {
			podSpec(o[operatorKey])["tolerations"] = []any{toleration}
			podSpec(o[agentKey])["tolerations"] = []any{toleration}
		},
	}, {
		name: "nodeSelector, priorityClassName, resources",
		vals: `{operator: {nodeSelector: {node-role.kubernetes.io/control-plane: ""}, priorityClassName: system-cluster-critical,
		                   resources: {requests: {cpu: 50m}}},
		        agent: {nodeSelector: {kubernetes.io/os: linux}, priorityClassName: system-node-critical,
		                resources: {limits: {memory: 64Mi}}}}`,
		edit: func(t *testing.T, o objects) {
			op, ag := podSpec(o[operatorKey]), podSpec(o[agentKey])
			op["nodeSelector"] = map[string]any{"node-role.kubernetes.io/control-plane": ""}
			op["priorityClassName"] = "system-cluster-critical"
			// Helm merges maps from --values into the defaults: limits stay.
			container(o[operatorKey])["resources"] = map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "256Mi"}}
			ag["nodeSelector"] = map[string]any{"kubernetes.io/os": "linux"}
			ag["priorityClassName"] = "system-node-critical"
			container(o[agentKey])["resources"] = map[string]any{"requests": map[string]any{"cpu": "5m", "memory": "32Mi"}, "limits": map[string]any{"memory": "64Mi"}}
		},
	}, {
		name: "operator flags",
		vals: `operator:
  maxUnavailable: 10%
  groupLabel: topology.kubernetes.io/zone
  maxUnavailablePerGroup: 1
  drainTimeout: 5m
  drainFailurePolicy: force
  rebootWindows: ["Mon-Fri 22:00-05:00 Europe/Berlin", "Sat,Sun 00:00-23:59", "3rd-Tue 22:00-02:00"]
  drainPodSelector: app!=db
  undrainableRetry: 2h
  skipWaitForDeleteTimeout: 300
  waitForVolumeDetach: false
  volumeDetachTimeout: 5m
  settleTime: 2m
  settlePdbs: false
  settleTimeout: 30m
  settleTimeoutPolicy: hold
  canaryNodes: 2
  canaryBake: 1h
  maxFailedPerVersion: 1
  extraArgs: [--max-failed-reboots=2, "--reboot-exclusion=2026-12-20/2027-01-04 Europe/Berlin"]`,
		edit: func(t *testing.T, o objects) {
			c := container(o[operatorKey])
			c["args"] = []any{"--max-unavailable=10%", "--drain-timeout=5m", "--drain-failure-policy=force", "--start-paused=true",
				"--group-label=topology.kubernetes.io/zone", "--max-unavailable-per-group=1",
				"--reboot-window=Mon-Fri 22:00-05:00 Europe/Berlin", "--reboot-window=Sat,Sun 00:00-23:59", "--reboot-window=3rd-Tue 22:00-02:00",
				"--undrainable-retry=2h", "--drain-pod-selector=app!=db", "--skip-wait-for-delete-timeout=300", "--wait-for-volume-detach=false", "--volume-detach-timeout=5m",
				"--settle-time=2m", "--settle-pdbs=false", "--settle-timeout=30m", "--settle-timeout-policy=hold",
				"--canary-nodes=2", "--canary-bake=1h", "--max-failed-per-version=1",
				"--max-failed-reboots=2", "--reboot-exclusion=2026-12-20/2027-01-04 Europe/Berlin"}
		},
	}, {
		name: "health checks: flags, and get on exactly those objects, each in its own namespace",
		vals: `operator: {healthChecks: ["deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas",
		                             "configmaps/gate@ops: object.data.open == 'yes'",
		                             "nodes/worker-1: object.spec.unschedulable != true"]}`,
		edit: func(t *testing.T, o objects) {
			appendArgs(o[operatorKey], "--health-check=deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas",
				"--health-check=configmaps/gate@ops: object.data.open == 'yes'", "--health-check=nodes/worker-1: object.spec.unschedulable != true")
			subjects := []any{map[string]any{"kind": "ServiceAccount", "name": "slipway-update-operator", "namespace": "slipway-system"}}
			for i, r := range []struct{ ns, group, resource, name string }{{"shop", "apps", "deployments", "web"}, {"ops", "", "configmaps", "gate"}} {
				name := fmt.Sprintf("slipway-update-operator-health-%d", i)
				o["rbac.authorization.k8s.io/v1 Role "+r.ns+"/"+name] = object{
					"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
					"metadata": map[string]any{"name": name, "namespace": r.ns},
					"rules":    []any{map[string]any{"apiGroups": []any{r.group}, "resources": []any{r.resource}, "resourceNames": []any{r.name}, "verbs": []any{"get"}}},
				}
				o["rbac.authorization.k8s.io/v1 RoleBinding "+r.ns+"/"+name] = object{
					"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
					"metadata": map[string]any{"name": name, "namespace": r.ns},
					"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
					"subjects": subjects,
				}
			}
			o["rbac.authorization.k8s.io/v1 ClusterRole slipway-update-operator-health"] = object{
				"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
				"metadata": map[string]any{"name": "slipway-update-operator-health"},
				"rules": []any{
					map[string]any{"apiGroups": []any{""}, "resources": []any{"nodes"}, "resourceNames": []any{"worker-1"}, "verbs": []any{"get"}},
				},
			}
			o["rbac.authorization.k8s.io/v1 ClusterRoleBinding slipway-update-operator-health"] = object{
				"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
				"metadata": map[string]any{"name": "slipway-update-operator-health"},
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "slipway-update-operator-health"},
				"subjects": subjects,
			}
		},
	}, {
		name: "hooks: flags, and the operator's policy lets it remove exactly these",
		vals: `operator: {beforeRebootAnnotations: [example.com/drained-ok, backup.example.com/done], afterRebootAnnotations: [example.com/healthy]}`,
		edit: func(t *testing.T, o objects) {
			appendArgs(o[operatorKey], "--before-reboot-annotations=example.com/drained-ok,backup.example.com/done", "--after-reboot-annotations=example.com/healthy")
			for _, v := range o[opVAPKey]["spec"].(map[string]any)["variables"].([]any) {
				switch v := v.(map[string]any); v["name"] {
				case "beforeRebootAnnotations":
					v["expression"] = "'example.com/drained-ok,backup.example.com/done'"
				case "afterRebootAnnotations":
					v["expression"] = "'example.com/healthy'"
				}
			}
		},
	}, {
		name: "steering: flags, and the operator's policy lets it change exactly these labels and that taint",
		vals: `operator: {preferNoScheduleTaint: example.com/reboot-pending, excludeFromLoadBalancers: true,
		             preRebootNodeLabels: [kured=rebooting, remediation.medik8s.io/exclude-from-remediation=true],
		             postRebootNodeLabels: [kured=done, remediation.medik8s.io/exclude-from-remediation-]}`,
		edit: func(t *testing.T, o objects) {
			appendArgs(o[operatorKey], "--prefer-no-schedule-taint=example.com/reboot-pending", "--exclude-from-load-balancers=true",
				"--pre-reboot-node-labels=kured=rebooting,remediation.medik8s.io/exclude-from-remediation=true",
				"--post-reboot-node-labels=kured=done,remediation.medik8s.io/exclude-from-remediation-")
			for _, v := range o[opVAPKey]["spec"].(map[string]any)["variables"].([]any) {
				switch v := v.(map[string]any); v["name"] {
				case "preRebootNodeLabels":
					v["expression"] = "'kured=rebooting,remediation.medik8s.io/exclude-from-remediation=true'"
				case "postRebootNodeLabels":
					v["expression"] = "'kured=done,remediation.medik8s.io/exclude-from-remediation-'"
				case "excludeFromLoadBalancers":
					v["expression"] = "'true'"
				case "preferNoScheduleTaint":
					v["expression"] = "'example.com/reboot-pending'"
				}
			}
		},
	}, {
		name: "existingSecret: the two secret-bearing variables from a Secret, as deploy/operator-secret",
		vals: `operator: {existingSecret: slipway-operator-env}`,
		edit: func(t *testing.T, o objects) {
			var env []any
			for _, k := range []string{"UPDATE_OPERATOR_NOTIFY_URL", "UPDATE_OPERATOR_PROMETHEUS_URL"} {
				env = append(env, map[string]any{"name": k, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "slipway-operator-env", "key": k, "optional": true}}})
			}
			c := container(o[operatorKey])
			c["env"] = append(c["env"].([]any), env...)
		},
	}, {
		name: "proofSecret: the proof's bearer token mounted from a Secret and passed as a file",
		vals: `operator: {proofSecret: slipway-proof}`,
		edit: func(t *testing.T, o objects) {
			appendArgs(o[operatorKey], "--proof-bearer-token-file=/var/run/secrets/slipway-proof/token")
			c := container(o[operatorKey])
			c["volumeMounts"] = []any{map[string]any{"name": "proof", "mountPath": "/var/run/secrets/slipway-proof", "readOnly": true}}
			spec := o[operatorKey]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			spec["volumes"] = []any{map[string]any{"name": "proof", "secret": map[string]any{"secretName": "slipway-proof"}}}
		},
	}, {
		name: "remediationFence: NodeHealthCheck's lease (a Role in medik8s-leases) and the Machine's kubeconfig mounted beside the proof's token",
		vals: `operator: {proofSecret: slipway-proof, remediationFence: {nodeHealthCheck: true, machinesKubeconfigSecret: capi-mgmt}}`,
		edit: func(t *testing.T, o objects) {
			appendArgs(o[operatorKey], "--proof-bearer-token-file=/var/run/secrets/slipway-proof/token",
				"--remediation-lease-namespace=medik8s-leases", "--remediation-machines-kubeconfig=/var/run/secrets/slipway-machines/kubeconfig")
			c := container(o[operatorKey])
			c["volumeMounts"] = []any{
				map[string]any{"name": "proof", "mountPath": "/var/run/secrets/slipway-proof", "readOnly": true},
				map[string]any{"name": "machines", "mountPath": "/var/run/secrets/slipway-machines", "readOnly": true}}
			spec := o[operatorKey]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			spec["volumes"] = []any{map[string]any{"name": "proof", "secret": map[string]any{"secretName": "slipway-proof"}},
				map[string]any{"name": "machines", "secret": map[string]any{"secretName": "capi-mgmt"}}}
			o["rbac.authorization.k8s.io/v1 Role medik8s-leases/slipway-remediation-fence"] = map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
				"metadata": map[string]any{"name": "slipway-remediation-fence", "namespace": "medik8s-leases"},
				"rules":    []any{map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "verbs": []any{"get", "list", "watch", "create", "update", "delete"}}}}
			o["rbac.authorization.k8s.io/v1 RoleBinding medik8s-leases/slipway-remediation-fence"] = map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
				"metadata": map[string]any{"name": "slipway-remediation-fence", "namespace": "medik8s-leases"},
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "slipway-remediation-fence"},
				"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "slipway-update-operator", "namespace": "slipway-system"}}}
		},
	}, {
		name: "operator flags left out",
		vals: `operator: {maxUnavailable: "", drainTimeout: "", drainFailurePolicy: "", startPaused: false}`,
		edit: func(t *testing.T, o objects) { delete(container(o[operatorKey]), "args") },
	}, {
		name: "agent extraArgs",
		vals: `agent: {extraArgs: [-v=1, --reboot-required-poll=30s]}`,
		edit: func(t *testing.T, o objects) { appendArgs(o[agentKey], "-v=1", "--reboot-required-poll=30s") },
	}, {
		name: "one operator replica, no PDB",
		vals: `operator: {replicas: 1}`,
		edit: func(t *testing.T, o objects) {
			o[operatorKey]["spec"].(map[string]any)["replicas"] = 1
			delete(o, pdbKey)
		},
	}, {
		name: "three operator replicas",
		vals: `operator: {replicas: 3}`,
		edit: func(t *testing.T, o objects) { o[operatorKey]["spec"].(map[string]any)["replicas"] = 3 },
	}, {
		name: "operator affinity off",
		vals: `operator: {affinity: null}`,
		edit: func(t *testing.T, o objects) { delete(podSpec(o[operatorKey]), "affinity") },
	}, {
		name: "agent policy off, acknowledged",
		vals: `agentPolicy: {enabled: false, acknowledgeUnconfinedAgents: true}`,
		edit: func(t *testing.T, o objects) { delete(o, vapKey); delete(o, vapbKey) },
	}, {
		name: "admission fence off",
		vals: `operator: {admissionFence: false}`,
		edit: func(t *testing.T, o objects) {
			for _, k := range []string{fenceKey, fenceBindingKey} {
				if _, ok := o[k]; !ok {
					t.Fatalf("the default install renders no %s", k)
				}
				delete(o, k)
			}
		},
	}, {
		name: "own namespace",
		vals: `namespace: {create: false}`,
		edit: func(t *testing.T, o objects) { delete(o, nsKey) },
	}, {
		name: "another namespace",
		ns:   "ops",
		edit: func(t *testing.T, o objects) {
			for _, obj := range o {
				md := obj["metadata"].(map[string]any)
				if md["namespace"] != nil {
					md["namespace"] = "ops"
				}
				if obj["kind"] == "Namespace" {
					md["name"] = "ops"
				}
				if subjects, ok := obj["subjects"].([]any); ok {
					for _, s := range subjects {
						s.(map[string]any)["namespace"] = "ops"
					}
				}
				if spec, ok := obj["spec"].(map[string]any); ok && spec["paramRef"] != nil {
					ref := spec["paramRef"].(map[string]any)
					ref["namespace"] = "ops" // the fence's Lease
				}
				if obj["kind"] == "ValidatingAdmissionPolicy" {
					// The policies name Slipway's ServiceAccounts with their namespace.
					replaceStrings(obj, "system:serviceaccount:slipway-system:", "system:serviceaccount:ops:")
				}
			}
		},
	}, {
		name: "fleetlock on another port",
		vals: `fleetlock: {enabled: true, port: 496}`,
		edit: func(t *testing.T, o objects) {
			fl := kustomizeOverlay(t, "fleetlock")
			for k := range o {
				delete(o, k)
			}
			maps.Copy(o, fl)
			ds := maps.Clone(o[flDSKey])
			setPath(t, ds, []string{"spec", "template", "spec", "containers", "0", "args", "0"}, "--listen=127.0.0.1:496")
			setPath(t, ds, []string{"spec", "template", "spec", "containers", "0", "readinessProbe", "httpGet", "port"}, 496)
			setPath(t, ds, []string{"spec", "template", "spec", "containers", "0", "livenessProbe", "httpGet", "port"}, 496)
			o[flDSKey] = ds
		},
	}, {
		name: "central fleetlock with a dynamic ClusterIP, another port, two CIDRs",
		vals: `fleetlock: {central: {enabled: true, port: 9081, service: {clusterIP: ""}, networkPolicy: {nodeCIDRs: [192.168.0.0/16, "fd00::/8"]}}}`,
		edit: func(t *testing.T, o objects) {
			fl := kustomizeOverlay(t, "fleetlock-central")
			for k := range o {
				delete(o, k)
			}
			maps.Copy(o, fl)
			dep := maps.Clone(o[centralKey])
			o[centralKey] = dep
			setPath(t, dep, []string{"spec", "template", "spec", "containers", "0", "args", "1"}, "--listen=:9081")
			setPath(t, dep, []string{"spec", "template", "spec", "containers", "0", "ports", "0", "containerPort"}, 9081)
			o[serviceKey] = mustParse(`apiVersion: v1
kind: Service
metadata:
  name: slipway-fleetlock
  namespace: slipway-system
  labels: {app.kubernetes.io/name: slipway-fleetlock-central, app.kubernetes.io/part-of: slipway}
spec:
  selector: {app.kubernetes.io/name: slipway-fleetlock-central}
  ports: [{name: fleetlock, port: 9081, targetPort: fleetlock}]`)
			o[netpolKey] = mustParse(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: slipway-fleetlock-central, namespace: slipway-system}
spec:
  podSelector: {matchLabels: {app.kubernetes.io/name: slipway-fleetlock-central}}
  policyTypes: [Ingress]
  ingress:
    - ports: [{port: fleetlock, protocol: TCP}]
      from: [{ipBlock: {cidr: 192.168.0.0/16}}, {ipBlock: {cidr: "fd00::/8"}}]`)
		},
	}, {
		name: "central fleetlock without the NetworkPolicy",
		vals: `fleetlock: {central: {enabled: true, networkPolicy: {enabled: false}}}`,
		edit: func(t *testing.T, o objects) {
			fl := kustomizeOverlay(t, "fleetlock-central")
			for k := range o {
				delete(o, k)
			}
			maps.Copy(o, fl)
			delete(o, netpolKey)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = namespace
			}
			var vals map[string]any
			if err := yaml.Unmarshal([]byte(tc.vals), &vals); err != nil {
				t.Fatal(err)
			}
			def := helm(t, nil)
			want := helm(t, nil)
			tc.edit(t, want)
			want = rekey(want)
			if len(differences(def, want)) == 0 {
				t.Fatal("the edit changes nothing: the case proves nothing")
			}
			assertSame(t, want, helmIn(t, vals, ns))
		})
	}
}

var overlayCache = map[string]objects{}

// kustomizeOverlay is `kubectl kustomize deploy/<dir>`, rendered once per test binary.
func kustomizeOverlay(t *testing.T, dir string) objects {
	t.Helper()
	if overlayCache[dir] == nil {
		overlayCache[dir] = kustomize(t, filepath.Join(deployDir, dir))
	}
	return maps.Clone(overlayCache[dir])
}

// setPath sets the value at path (map keys, and list indexes as decimal strings) in o, deep-copying
// what it walks through so that cached renders stay as rendered.
func setPath(t *testing.T, o object, path []string, v any) {
	t.Helper()
	var cur any = o
	for i, p := range path {
		last := i == len(path)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = v
				return
			}
			next := deepCopy(c[p])
			c[p] = next
			cur = next
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(c) {
				t.Fatalf("path %v: %q is not an index of a list of %d", path, p, len(c))
			}
			if last {
				c[n] = v
				return
			}
			next := deepCopy(c[n])
			c[n] = next
			cur = next
		default:
			t.Fatalf("path %v: nothing at %q", path, p)
		}
	}
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

func mustParse(s string) object {
	// Through the same parser as the renders, so numbers are the same Go type.
	nodes, err := (&kio.ByteReader{Reader: strings.NewReader(s), OmitReaderAnnotations: true}).Read()
	if err != nil || len(nodes) != 1 {
		panic(fmt.Sprint(err, len(nodes)))
	}
	m, err := nodes[0].Map()
	if err != nil {
		panic(err)
	}
	return m
}

// Values the chart refuses, with the reason.
func TestValuesRefused(t *testing.T) {
	for _, tc := range []struct{ vals, want string }{
		{`image: {tag: latest}`, "at '/image/tag': 'not' failed"},
		{`image: {tag: ""}`, "at '/image/tag'"},
		{`image: {digest: v1}`, "at '/image/digest'"},
		{`image: {pullPolicy: Sometimes}`, "at '/image/pullPolicy'"},
		{`operator: {maxUnavailable: 0}`, "at '/operator/maxUnavailable'"},
		{`operator: {maxUnavailable: "0%"}`, "at '/operator/maxUnavailable'"},
		{`operator: {maxUnavailble: 2}`, "'maxUnavailble' not allowed"},
		{`operator: {rebootWindows: "Mon 22:00-05:00"}`, "at '/operator/rebootWindows'"},
		{`operator: {drainFailurePolicy: sometimes}`, "at '/operator/drainFailurePolicy'"},
		{`operator: {replicas: 0}`, "at '/operator/replicas'"},
		{`fleetlock: {enabled: "yes"}`, "at '/fleetlock/enabled'"},
		{`fleetlock: {port: 70000}`, "at '/fleetlock/port'"},
		{`fleetlock: {port: 8495}`, "at '/fleetlock/port'"},
		{`fleetlock: {central: {networkPolicy: {nodeCIDRs: []}}}`, "at '/fleetlock/central/networkPolicy/nodeCIDRs'"},
		{`fleetlock: {networkPolicy: {enabled: true}}`, "'networkPolicy' not allowed"},
		{`fleetlock: {enabled: true, central: {enabled: true}}`, "exclude each other"},
		{`tolerations: []`, "'tolerations' not allowed"},
		{`operator: {beforeRebootAnnotations: ["x']+['y"]}`, "is not an annotation key"},
		{`operator: {preRebootNodeLabels: ["x']+['y=1"]}`, "is not KEY=VALUE or KEY-"},
		{`operator: {postRebootNodeLabels: [kured]}`, "is not KEY=VALUE or KEY-"},
		{`operator: {preferNoScheduleTaint: "x' + 'y"}`, "at '/operator/preferNoScheduleTaint'"},
		{`operator: {existingSecret: "Not A Name"}`, "at '/operator/existingSecret'"},
		{`agentPolicy: {enabled: false}`, "also set agentPolicy.acknowledgeUnconfinedAgents=true"},
		{`operator: {afterRebootAnnotations: "example.com/a"}`, "at '/operator/afterRebootAnnotations'"},
		{`policies: [{name: "Not A Name", spec: {}}]`, "at '/policies/0/name'"},
		{`policies: [{name: gpu}]`, "at '/policies/0'"},
	} {
		var vals map[string]any
		if err := yaml.Unmarshal([]byte(tc.vals), &vals); err != nil {
			t.Fatal(err)
		}
		_, err := helmTemplate(vals, namespace)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error naming %q, got %v", tc.vals, tc.want, err)
		}
	}
	// The templates refuse latest themselves, should the schema be skipped (--skip-schema-validation).
	_, err := render(map[string]any{"image": map[string]any{"tag": "latest"}}, namespace, kubeVersion, true)
	if err == nil || !strings.Contains(err.Error(), "image.tag: latest is refused") {
		t.Errorf("tag latest without the schema: got %v", err)
	}
}

// `helm lint --strict` (Helm's pkg/lint, as the CLI runs it) finds no warning and no error, with the
// defaults and with every optional part on.
// everythingOn are values that switch on what the defaults leave off.
const everythingOn = `{fleetlock: {enabled: true}, agent: {rebootRequiredFile: true},
  operator: {rebootWindows: ["Mon-Fri 22:00-05:00"], groupLabel: topology.kubernetes.io/zone, maxUnavailablePerGroup: 1,
             tolerations: [{operator: Exists}], nodeSelector: {a: b}, priorityClassName: p}}`

func TestLint(t *testing.T) {
	everything := map[string]any{}
	if err := yaml.Unmarshal([]byte(everythingOn), &everything); err != nil {
		t.Fatal(err)
	}
	for name, vals := range map[string]map[string]any{"defaults": nil, "everything on": everything} {
		lint := action.NewLint()
		lint.Strict = true
		lint.Namespace = namespace
		lint.KubeVersion = kubeVersion
		res := lint.Run([]string{chartDir}, vals)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: %v", name, m)
			} else {
				t.Logf("%s: %v", name, m)
			}
		}
		if action.HasWarningsOrErrors(res) || res.TotalChartsLinted != 1 {
			t.Errorf("%s: lint: %d charts linted, errors %v", name, res.TotalChartsLinted, res.Errors)
		}
	}
}

// The chart needs Kubernetes 1.30 (the agent's ValidatingAdmissionPolicy): older clusters are refused.
func TestKubeVersionRequired(t *testing.T) {
	for v, ok := range map[string]bool{"v1.29.9": false, "v1.30.0": true, "v1.37.0": true} {
		kv, err := common.ParseKubeVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		_, err = render(nil, namespace, kv, false)
		if ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "kubeVersion") {
			t.Errorf("Kubernetes %s: want accepted %v, got %v", v, ok, err)
		}
	}
}

// The chart runs the release kustomize pins: Chart.yaml's appVersion is values.yaml's image.tag is
// the tag of deploy/, deploy/fleetlock/ and deploy/fleetlock-central/ (and none is latest).
func TestChartPinsKustomizeImage(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	tag := ch.Values["image"].(map[string]any)["tag"]
	if tag != ch.Metadata.AppVersion || tag == "latest" || tag == "" {
		t.Errorf("values image.tag %v, Chart.yaml appVersion %q", tag, ch.Metadata.AppVersion)
	}
	for dir, keys := range map[string][]string{
		deployDir:                                     {operatorKey, agentKey},
		filepath.Join(deployDir, "fleetlock"):         {operatorKey, agentKey, flDSKey},
		filepath.Join(deployDir, "fleetlock-central"): {operatorKey, agentKey, centralKey},
	} {
		o := kustomize(t, dir)
		for _, k := range keys {
			if img := container(o[k])["image"]; img != "ghcr.io/slipway-dev/slipway:"+tag.(string) {
				t.Errorf("%s: %s runs %v, the chart %v", dir, k, img, tag)
			}
		}
	}
}

// withComponent renders deploy/ with the component at deploy/<component> and the files (name ->
// content) listed as resources beside it, as a user's overlay does.
func withComponent(t *testing.T, component string, files map[string]string) objects {
	t.Helper()
	return kustomize(t, overlayDir(t, component, files))
}

// overlayDir writes that overlay and returns its directory.
func overlayDir(t *testing.T, component string, files map[string]string) string {
	t.Helper()
	deploy, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, deploy) // kustomize refuses absolute paths
	if err != nil {
		t.Fatal(err)
	}
	resources := []string{fmt.Sprintf("%q", rel)}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		resources = append(resources, fmt.Sprintf("%q", name))
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%q]\n",
		strings.Join(resources, ", "), filepath.Join(rel, component))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// settingsConfigMap is a slipway-operator-settings ConfigMap (deploy/operator-settings) with the data
// of each map.
func settingsConfigMap(data ...map[string]string) string {
	all := map[string]string{}
	for _, d := range data {
		maps.Copy(all, d)
	}
	s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slipway-operator-settings\n  annotations: {config.kubernetes.io/local-config: \"true\"}\ndata:\n"
	for _, k := range slices.Sorted(maps.Keys(all)) {
		s += fmt.Sprintf("  %s: %q\n", k, all[k])
	}
	return s
}

// The six hook and steering flags, as deploy/operator-settings names them (the flags' names).
var settingFlags = []string{"before-reboot-annotations", "after-reboot-annotations", "pre-reboot-node-labels",
	"post-reboot-node-labels", "exclude-from-load-balancers", "prefer-no-schedule-taint"}

// takeSettings removes the six flags from the operator's container and returns them.
func takeSettings(o object) map[string]string { return takeFlags(o, settingFlags) }

// takeFlags removes the flags named from the operator's container, from its args (--flag=value, as
// Helm passes them) or its env (UPDATE_OPERATOR_<FLAG>, as the components do), and returns them.
func takeFlags(o object, flags []string) map[string]string {
	c := container(o)
	got := map[string]string{}
	var args, env []any
	for _, a := range c["args"].([]any) {
		name, value, _ := strings.Cut(strings.TrimPrefix(a.(string), "--"), "=")
		if slices.Contains(flags, name) {
			got[name] = value
			continue
		}
		args = append(args, a)
	}
	for _, e := range c["env"].([]any) {
		e := e.(map[string]any)
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(e["name"].(string), "UPDATE_OPERATOR_"), "_", "-"))
		if v, ok := e["value"].(string); ok && slices.Contains(flags, name) {
			got[name] = v
			continue
		}
		env = append(env, e)
	}
	c["args"], c["env"] = args, env
	return got
}

// deploy/operator-settings and Helm's values render the same operator policy and give the operator
// the same flag values (the component as environment variables, Helm as arguments), and nothing
// else differs: a kustomize user sets hooks and steering in one ConfigMap and writes no CEL.
func TestOperatorSettingsEqualsComponent(t *testing.T) {
	settings := map[string]string{
		"before-reboot-annotations":   "example.com/drained-ok,backup.example.com/done",
		"after-reboot-annotations":    "example.com/healthy",
		"pre-reboot-node-labels":      "kured=rebooting,remediation.medik8s.io/exclude-from-remediation=true",
		"post-reboot-node-labels":     "kured=done,remediation.medik8s.io/exclude-from-remediation-",
		"exclude-from-load-balancers": "true",
		"prefer-no-schedule-taint":    "example.com/reboot-pending",
	}
	pools := map[string]string{ // not flags: the policy only
		"reboot-policy-labels": "gpu.example.com/draining=true,gpu.example.com/draining-,node.kubernetes.io/exclude-from-external-load-balancers=true",
		"reboot-policy-taints": "gpu.example.com/reboot-pending",
	}
	want := withComponent(t, "operator-settings", map[string]string{"settings.yaml": settingsConfigMap(settings, pools)})
	for k := range want {
		if strings.Contains(k, "slipway-operator-settings") {
			t.Errorf("the settings ConfigMap is applied (%s): it is local-config, read by the component only", k)
		}
	}
	got := helm(t, map[string]any{"operator": map[string]any{
		"beforeRebootAnnotations":  []any{"example.com/drained-ok", "backup.example.com/done"},
		"afterRebootAnnotations":   []any{"example.com/healthy"},
		"preRebootNodeLabels":      []any{"kured=rebooting", "remediation.medik8s.io/exclude-from-remediation=true"},
		"postRebootNodeLabels":     []any{"kured=done", "remediation.medik8s.io/exclude-from-remediation-"},
		"excludeFromLoadBalancers": true,
		"preferNoScheduleTaint":    "example.com/reboot-pending",
	}, "policies": []any{map[string]any{"name": "gpu", "spec": map[string]any{
		"nodeSelector": map[string]any{"matchLabels": map[string]any{"gpu": "true"}},
		"steering": map[string]any{"preLabels": []any{"gpu.example.com/draining=true"}, "postLabels": []any{"gpu.example.com/draining-"},
			"excludeFromLoadBalancers": true, "preferNoScheduleTaint": "gpu.example.com/reboot-pending"}}}},
	})
	const poolKey = "update.slipway.dev/v1alpha1 RebootPolicy gpu"
	if _, ok := got[poolKey]; !ok {
		t.Fatalf("Helm renders no %s: %v", poolKey, slices.Sorted(maps.Keys(got)))
	}
	delete(got, poolKey) // the pool itself is Helm's; kustomize users write theirs

	fromComponent, fromHelm := takeSettings(want[operatorKey]), takeSettings(got[operatorKey])
	if !maps.Equal(fromComponent, settings) {
		t.Errorf("the component gives the operator %v, want the ConfigMap's %v", fromComponent, settings)
	}
	if !maps.Equal(fromHelm, settings) {
		t.Errorf("Helm gives the operator %v, want %v", fromHelm, settings)
	}
	// The policy carries the values: not the base's.
	base := kustomize(t, deployDir)
	if cmp.Equal(base[opVAPKey], want[opVAPKey]) {
		t.Error("the component left the operator policy as the base has it")
	}
	assertSame(t, want, got)

	// Off, as the example ships it: the same as the base and Helm's defaults, but for the six
	// variables passed empty.
	off := map[string]string{"exclude-from-load-balancers": "false"}
	for _, f := range settingFlags {
		if _, ok := off[f]; !ok {
			off[f] = ""
		}
	}
	offObjs := withComponent(t, "operator-settings", map[string]string{"settings.yaml": settingsConfigMap(off, map[string]string{"reboot-policy-labels": "", "reboot-policy-taints": ""})})
	if passed := takeSettings(offObjs[operatorKey]); !maps.Equal(passed, off) {
		t.Errorf("off: the operator gets %v", passed)
	}
	defaults := helm(t, nil)
	takeSettings(defaults[operatorKey])
	assertSame(t, offObjs, defaults)
}

// A settings ConfigMap without one of the keys fails the build, naming the key: the component
// never renders a policy from a value nobody gave.
func TestOperatorSettingsMissingKey(t *testing.T) {
	data := map[string]string{"exclude-from-load-balancers": "false", "reboot-policy-labels": "", "reboot-policy-taints": ""}
	for _, f := range settingFlags[1:] {
		if _, ok := data[f]; !ok {
			data[f] = ""
		}
	}
	dir := overlayDir(t, "operator-settings", map[string]string{"settings.yaml": settingsConfigMap(data)})
	_, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err == nil || !strings.Contains(err.Error(), settingFlags[0]) {
		t.Errorf("a settings ConfigMap without %s: %v, want an error naming it", settingFlags[0], err)
	}
}

// takeHealthCheck removes the operator's --health-check (an argument, as Helm passes it, or the
// UPDATE_OPERATOR_HEALTH_CHECK variable, as deploy/health-check does) and returns it with the spaces
// of its object part dropped, as the operator reads it (operator/health TestParse).
func takeHealthCheck(t *testing.T, o object) string {
	t.Helper()
	check := takeFlags(o, []string{"health-check"})["health-check"]
	ref, expr, ok := strings.Cut(check, ":")
	if !ok {
		t.Fatalf("health check %q: no ':'", check)
	}
	// "configmaps ./ ..." (the core group: an empty word) is the operator's configmaps/...
	ref = strings.Replace(strings.Join(strings.Fields(ref), ""), "./", "/", 1)
	return ref + ": " + strings.TrimSpace(expr)
}

// deploy/health-check and Helm's operator.healthChecks give the operator the same check and render
// the same Role and RoleBinding (get on exactly that object), and nothing else differs.
func TestHealthCheckEqualsComponent(t *testing.T) {
	for _, c := range []struct {
		resource, group, name, namespace, expression string
	}{
		{"deployments", "apps", "web", "shop", "object.status.availableReplicas >= object.spec.replicas"},
		{"configmaps", "", "gate", "ops", "object.data.open == 'yes'"},
		{"cephclusters", "ceph.rook.io", "rook-ceph", "rook-ceph", `object.status.ceph.health == "HEALTH_OK"`},
	} {
		cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slipway-health-check\n  annotations: {config.kubernetes.io/local-config: \"true\"}\n"+
			"data:\n  resource: %q\n  group: %q\n  name: %q\n  namespace: %q\n  expression: %q\n", c.resource, c.group, c.name, c.namespace, c.expression)
		want := withComponent(t, "health-check", map[string]string{"check.yaml": cm})
		object := c.resource
		if c.group != "" {
			object += "." + c.group
		}
		flag := object + "/" + c.name + "@" + c.namespace + ": " + c.expression
		got := helm(t, map[string]any{"operator": map[string]any{"healthChecks": []any{flag}}})
		roleKey := "rbac.authorization.k8s.io/v1 Role " + c.namespace + "/slipway-update-operator-health-0"
		if _, ok := want[roleKey]; !ok {
			t.Fatalf("%s: the component renders no %s: %v", flag, roleKey, slices.Sorted(maps.Keys(want)))
		}
		if fromComponent, fromHelm := takeHealthCheck(t, want[operatorKey]), takeHealthCheck(t, got[operatorKey]); fromComponent != flag || fromHelm != flag {
			t.Errorf("the operator's check: component %q, Helm %q, want %q", fromComponent, fromHelm, flag)
		}
		assertSame(t, want, got)
	}
}

// nodePrep.enabled adds the object of `kubectl kustomize deploy/node-prep/`, exactly: the DaemonSet,
// its config in its pod template (no ConfigMap: the operator may write those).
func TestNodePrepEqualsOverlay(t *testing.T) {
	want := kustomize(t, filepath.Join(deployDir, "node-prep"))
	const dsKey = "apps/v1 DaemonSet slipway-system/slipway-node-prep"
	if _, ok := want[dsKey]; !ok || len(want) != 1 {
		t.Fatalf("the overlay renders %v, want %s alone", slices.Sorted(maps.Keys(want)), dsKey)
	}
	snippet, err := os.ReadFile(filepath.Join(deployDir, "..", "butane", "snippets", "flatcar-slipway.ign"))
	if err != nil {
		t.Fatal(err)
	}
	config := func(o objects) any {
		return o[dsKey]["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any)["update.slipway.dev/node-config"]
	}
	if config(want) != string(snippet) {
		t.Errorf("the overlay's pod template does not carry the snippet: %.80v", config(want))
	}
	got := helm(t, map[string]any{"nodePrep": map[string]any{"enabled": true}})
	for k := range helm(t, nil) {
		delete(got, k)
	}
	assertSame(t, want, got)

	custom := helm(t, map[string]any{"nodePrep": map[string]any{"enabled": true, "config": `{"ignition":{"version":"3.4.0"}}`}})
	if c := config(custom); c != `{"ignition":{"version":"3.4.0"}}` {
		t.Errorf("nodePrep.config not used: %v", c)
	}
}
