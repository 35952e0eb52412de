// Package deploy holds the kustomize base; its test renders it with kubectl, applies it to a real
// API server and checks, as each ServiceAccount, that the RBAC allows what the component needs and
// nothing it must not have.
package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

const ns = "slipway-system"

func as(t *testing.T, cp *testenv.ControlPlane, sa string) kubernetes.Interface {
	t.Helper()
	return asIn(cp, ns, sa, "")
}

// asIn is a client acting as ServiceAccount namespace/sa; node, if set, is the node claim a pod-bound
// token would carry (authentication.kubernetes.io/node-name).
func asIn(cp *testenv.ControlPlane, namespace, sa, node string) kubernetes.Interface {
	cfg := cp.RestConfig()
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// access is one SelfSubjectAccessReview and its expected answer.
type access struct {
	verb, group, resource, sub, namespace string
	want                                  bool
}

// checkAccess asks each review as c (named who in errors).
func checkAccess(t *testing.T, who string, c kubernetes.Interface, checks []access) {
	t.Helper()
	for _, k := range checks {
		if got := can(t, c, k.verb, k.group, k.resource, k.sub, k.namespace); got != k.want {
			t.Errorf("%s %s %s/%s/%s in %q: allowed=%v, want %v", who, k.verb, k.group, k.resource, k.sub, k.namespace, got, k.want)
		}
	}
}

func can(t *testing.T, c kubernetes.Interface, verb, group, resource, sub, namespace string) bool {
	t.Helper()
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: namespace,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// kustomize renders dir (relative to deploy/) with the control plane's kubectl; under -short (no
// control-plane binaries) with kustomize's API in-process, which is what kubectl embeds (deploy/helmtest's
// TestKubectlKustomize checks that both render the same objects).
func kustomize(t *testing.T, dir string) string {
	t.Helper()
	if testenv.Short() {
		rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			t.Fatalf("kustomize %s: %v", dir, err)
		}
		y, err := rm.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		return string(y)
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(bin, "kubectl"), "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return string(out)
}

// shared is the one control plane of this package, with the rendered deploy/ applied; started by the
// first test that needs it and stopped by TestMain.
var (
	shared    = &testenv.Shared{Name: "deploy"}
	applyOnce sync.Once
	applyErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

// controlPlane returns the shared control plane with `kubectl kustomize deploy/` applied to it.
func controlPlane(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	cp := shared.Need(t)
	rendered := kustomize(t, ".")
	applyOnce.Do(func() {
		bin, _ := testenv.BinDir()
		apply := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", cp.Kubeconfig, "apply", "--server-side", "-f", "-")
		apply.Stdin = strings.NewReader(rendered)
		if out, err := apply.CombinedOutput(); err != nil {
			applyErr = fmt.Errorf("kubectl apply: %v\n%s", err, out)
		}
	})
	if applyErr != nil {
		t.Fatal(applyErr)
	}
	return cp
}

func TestRenderedRBAC(t *testing.T) {
	ctx := context.Background()
	rendered := kustomize(t, ".")
	for _, want := range []string{"kind: DaemonSet", "kind: Deployment", "kind: ValidatingAdmissionPolicy\n", "kind: ValidatingAdmissionPolicyBinding", "/var/run/dbus"} {
		if !strings.Contains(rendered, want) {
			t.Errorf("rendered manifests lack %q", want)
		}
	}
	cp := controlPlane(t)
	admin := cp.Client()
	if _, err := testenv.CreateNode(ctx, admin, "node-a", "boot-a", nil); err != nil {
		t.Fatal(err)
	}

	agent := as(t, cp, "slipway-update-agent")
	operator := as(t, cp, "slipway-update-operator")
	for who, checks := range map[string][]access{
		"slipway-update-agent": {
			{"get", "", "nodes", "", "", true}, {"watch", "", "nodes", "", "", true}, {"patch", "", "nodes", "", "", true},
			{"update", "", "nodes", "status", "", false}, {"patch", "", "nodes", "status", "", false},
			{"update", "", "nodes", "", "", false}, {"create", "", "nodes", "", "", false}, {"delete", "", "nodes", "", "", false},
			{"create", "", "pods", "eviction", "default", false}, {"delete", "", "pods", "", "default", false},
			{"list", "", "secrets", "", ns, false}, {"update", "coordination.k8s.io", "leases", "", ns, false},
			{"create", "", "serviceaccounts", "token", ns, false}, {"impersonate", "", "serviceaccounts", "", ns, false},
			{"patch", "", "configmaps", "", ns, false},
			{"delete", "admissionregistration.k8s.io", "validatingadmissionpolicies", "", "", false},
			{"delete", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "", "", false},
		},
		"slipway-update-operator": {
			{"list", "", "nodes", "", "", true}, {"patch", "", "nodes", "", "", true},
			{"list", "", "pods", "", "", true}, {"watch", "", "pods", "", "", true}, {"create", "", "pods", "eviction", "default", true},
			{"get", "apps", "daemonsets", "", "kube-system", true}, {"create", "", "events", "", "default", true},
			{"get", "", "persistentvolumeclaims", "", "default", true}, {"list", "", "persistentvolumeclaims", "", "default", false},
			{"update", "coordination.k8s.io", "leases", "", ns, false}, {"update", "coordination.k8s.io", "leases", "", "default", false},
			{"delete", "", "pods", "", "default", false}, {"delete", "", "nodes", "", "", false},
			{"get", "", "secrets", "", ns, false}, {"update", "", "nodes", "status", "", false},
			{"delete", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "", "", false},
			{"create", "", "serviceaccounts", "token", ns, false},
			{"create", "", "configmaps", "", ns, true}, {"patch", "", "configmaps", "", ns, false}, {"watch", "", "configmaps", "", ns, false},
			{"patch", "", "configmaps", "", "kube-system", false}, {"delete", "", "configmaps", "", ns, false},
		},
	} {
		checkAccess(t, who, map[string]kubernetes.Interface{"slipway-update-agent": agent, "slipway-update-operator": operator}[who], checks)
	}

	// The operator's token reaches its own three ConfigMaps and its Lease by name, as its informers and
	// leader election use them, and nothing else of its namespace: a leaked token cannot rewrite another
	// ConfigMap or Lease there.
	for _, c := range []struct {
		verb, group, resource, name string
		want                        bool
	}{
		{"update", "", "configmaps", "slipway-fleet", true}, {"patch", "", "configmaps", "slipway-fleet-record", true},
		{"get", "", "configmaps", "slipway-history", true}, {"update", "", "configmaps", "someone-elses", false},
		{"update", "coordination.k8s.io", "leases", "slipway-update-operator", true}, {"update", "coordination.k8s.io", "leases", "other-lock", false},
	} {
		r, err := operator.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: ns, Name: c.name}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != c.want {
			t.Errorf("operator %s %s %s: allowed=%v, want %v", c.verb, c.resource, c.name, r.Status.Allowed, c.want)
		}
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The informers' list and watch by name, for real.
	byName := metav1.ListOptions{FieldSelector: "metadata.name=slipway-fleet"}
	if _, err := operator.CoreV1().ConfigMaps(ns).List(ctx, byName); err != nil {
		t.Errorf("the operator's list of slipway-fleet by name: %v", err)
	}
	if w, err := operator.CoreV1().ConfigMaps(ns).Watch(ctx, byName); err != nil {
		t.Errorf("the operator's watch of slipway-fleet by name: %v", err)
	} else {
		w.Stop()
	}
	if _, err := operator.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the operator's list of every ConfigMap: %v, want forbidden", err)
	}

	// And for real: the agent cannot evict a pod; the operator can. (What the agent may patch, with its
	// real pod-bound token, is TestAgentPolicy's.)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	if err := agent.PolicyV1().Evictions("default").Evict(ctx, ev); err == nil {
		t.Error("the agent could evict a pod")
	}
	if err := operator.PolicyV1().Evictions("default").Evict(ctx, ev); err != nil {
		t.Errorf("the operator cannot evict a pod: %v", err)
	}
}

// agentDaemonSet decodes the agent DaemonSet from rendered manifests.
func agentDaemonSet(t *testing.T, rendered string) *appsv1.DaemonSet {
	t.Helper()
	for _, doc := range strings.Split(rendered, "\n---\n") {
		if strings.Contains(doc, "kind: DaemonSet") && strings.Contains(doc, "name: slipway-update-agent") {
			var ds appsv1.DaemonSet
			if err := yaml.Unmarshal([]byte(doc), &ds); err != nil {
				t.Fatal(err)
			}
			if len(ds.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("agent DaemonSet has %d containers, want 1", len(ds.Spec.Template.Spec.Containers))
			}
			return &ds
		}
	}
	t.Fatalf("no agent DaemonSet in:\n%s", rendered)
	return nil
}

// hostMounts maps each hostPath the agent container mounts to its mount.
func hostMounts(ds *appsv1.DaemonSet) map[string]corev1.VolumeMount {
	paths := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			paths[v.Name] = v.HostPath.Path
		}
	}
	out := map[string]corev1.VolumeMount{}
	for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
		if p, ok := paths[m.Name]; ok {
			out[p] = m
		}
	}
	return out
}

// checkConfined asserts what every variant of the agent DaemonSet keeps: the runtime's seccomp
// profile, no capabilities, no privilege escalation, a read-only root, no host namespaces, and only
// read-only host mounts.
func checkConfined(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	seccomp := pod.SecurityContext != nil && pod.SecurityContext.SeccompProfile != nil &&
		pod.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		seccomp = c.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	}
	if !seccomp {
		t.Error("the agent does not run under the RuntimeDefault seccomp profile")
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the agent container has no securityContext")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the agent's root filesystem is not read-only")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the agent allows privilege escalation")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("the agent is privileged")
	}
	if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
		t.Errorf("the agent's capabilities are %+v, want drop [ALL] and nothing added", sc.Capabilities)
	}
	if pod.HostPID || pod.HostNetwork || pod.HostIPC {
		t.Error("the agent shares a host namespace")
	}
	// The one writable host path: /etc/flatcar, where the agent sets update.conf's GROUP and SERVER
	// for the node's pool (only in a file Slipway may edit: internal/updateconf).
	for path, m := range hostMounts(ds) {
		if !m.ReadOnly && path != "/etc/flatcar" {
			t.Errorf("host %s is mounted writable at %s", path, m.MountPath)
		}
	}
}

// The default agent DaemonSet: confined as far as a root D-Bus client can be, the system bus socket's
// directory mounted, no host /run, and the reboot-required file off.
func TestAgentDaemonSet(t *testing.T) {
	ds := agentDaemonSet(t, kustomize(t, "."))
	checkConfined(t, ds)
	mounts := hostMounts(ds)
	for path := range mounts {
		if path == "/run" || path == "/var/run" || path == "/" {
			t.Errorf("the default agent mounts host %s", path)
		}
	}
	if m, ok := mounts["/var/run/dbus"]; !ok || m.MountPath != "/var/run/dbus" {
		t.Errorf("the system bus socket's directory is not mounted at /var/run/dbus: %v", mounts)
	}
	args := ds.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--reboot-required-file=") {
		t.Errorf("agent args %v do not disable --reboot-required-file (no /run is mounted)", args)
	}
}

// deploy/reboot-required-file/ as a component of deploy/ and of deploy/fleetlock/: host /run mounted
// read-only, the flag pointing into it, and everything else as confined as before.
func TestRebootRequiredFileComponent(t *testing.T) {
	for _, base := range []string{".", "fleetlock"} {
		t.Run(base, func(t *testing.T) {
			dir := t.TempDir()
			abs, err := filepath.Abs(base)
			if err != nil {
				t.Fatal(err)
			}
			comp, _ := filepath.Abs("reboot-required-file")
			relBase, _ := filepath.Rel(dir, abs)
			relComp, _ := filepath.Rel(dir, comp)
			k := fmt.Sprintf("resources: [%s]\ncomponents: [%s]\n", relBase, relComp)
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
				t.Fatal(err)
			}
			ds := agentDaemonSet(t, kustomize(t, dir))
			checkConfined(t, ds)
			m, ok := hostMounts(ds)["/run"]
			if !ok || m.MountPath != "/host/run" || !m.ReadOnly {
				t.Errorf("host /run is not mounted read-only at /host/run: %+v", hostMounts(ds))
			}
			args := ds.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, "--reboot-required-file=/host/run/reboot-required") || slices.Contains(args, "--reboot-required-file=") {
				t.Errorf("agent args %v do not point --reboot-required-file into the mounted /run", args)
			}
		})
	}
}

// Every image the shipped kustomizations render is pinned to a version: `:latest` or no tag would make
// a restarted pod run whatever was pushed last.
func TestImagesPinned(t *testing.T) {
	image := regexp.MustCompile(`(?m)^\s*(?:-\s+)?image:\s*"?([^"\s]+)`)
	for _, dir := range []string{".", "fleetlock", "node-prep"} {
		found := image.FindAllStringSubmatch(kustomize(t, dir), -1)
		if len(found) == 0 {
			t.Errorf("%s renders no image at all", dir)
		}
		for _, m := range found {
			ref := m[1]
			if strings.Contains(ref, "@sha256:") {
				continue
			}
			name, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
			if !ok || tag == "" || tag == "latest" {
				t.Errorf("%s renders image %q (%s): pin a version tag, not latest or none", dir, ref, name)
			}
		}
	}
}

// The deploy/operator-secret component gives the operator its two secret-bearing variables from a
// Secret -- those two only: a Secret key UPDATE_OPERATOR_LEADER_ELECT=false must not reach it -- and
// changes nothing else of the Deployment.
func TestOperatorSecretExample(t *testing.T) {
	operator := func(rendered string) appsv1.Deployment {
		for _, doc := range strings.Split(rendered, "\n---\n") {
			var d appsv1.Deployment
			if err := yaml.Unmarshal([]byte(doc), &d); err == nil && d.Kind == "Deployment" && d.Name == "slipway-update-operator" {
				return d
			}
		}
		t.Fatal("no operator Deployment rendered")
		return appsv1.Deployment{}
	}
	dir := t.TempDir()
	abs, _ := filepath.Abs(".")
	comp, _ := filepath.Abs("operator-secret")
	relBase, _ := filepath.Rel(dir, abs)
	relComp, _ := filepath.Rel(dir, comp)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf("resources: [%s]\ncomponents: [%s]\n", relBase, relComp)), 0o644); err != nil {
		t.Fatal(err)
	}
	base, with := operator(kustomize(t, ".")), operator(kustomize(t, dir))
	c := with.Spec.Template.Spec.Containers[0]
	if len(c.EnvFrom) != 0 {
		t.Fatalf("envFrom %+v: every key of the Secret would set a flag", c.EnvFrom)
	}
	var names []string
	for _, e := range c.Env[len(base.Spec.Template.Spec.Containers[0].Env):] {
		r := e.ValueFrom
		if r == nil || r.SecretKeyRef == nil || r.SecretKeyRef.Name != "slipway-operator-env" || r.SecretKeyRef.Key != e.Name {
			t.Errorf("env %s: %+v, want its key of Secret slipway-operator-env", e.Name, r)
		}
		names = append(names, e.Name)
	}
	if strings.Join(names, " ") != "UPDATE_OPERATOR_NOTIFY_URL UPDATE_OPERATOR_PROMETHEUS_URL" {
		t.Errorf("env from the Secret: %v, want exactly the notification and Prometheus URLs", names)
	}
	with.Spec.Template.Spec.Containers[0].Env = base.Spec.Template.Spec.Containers[0].Env
	if !equality.Semantic.DeepEqual(base.Spec, with.Spec) {
		t.Error("the overlay changes more of the operator's Deployment than its environment")
	}
}
