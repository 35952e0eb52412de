package docsguard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// How a command is held to what it does.
type mode int

const (
	run     mode = iota // run as written (bash -c) on a cluster; it must succeed
	until               // run as written; it runs until stopped (a watch): alive after a while, with output
	makeN               // a make target: `make -n` as written must succeed (the target exists and expands)
	parse               // a command line of a Slipway binary: as written plus --version must succeed (every flag known)
	excused             // cannot run here: why, and the test that proves what it does instead
)

// rule holds the commands of page whose text matches re.
type rule struct {
	page    string
	re      string
	mode    mode
	cluster string // run, until: the API server it talks to: release, helm, helm2
	dir     string // run: "" the work directory (a copy of deploy/, dist/ beside it), "dist", "repo"
	why     string // excused: why it cannot run here
	test    string // excused: the test that proves what it does
	before  func(w *world)
	check   func(w *world) // after a run: what it must have done
	used    int
}

// world is what the commands run in: a home, a work directory, the release, three API servers.
type world struct {
	t        *testing.T
	ctx      context.Context
	repo     string
	work     string
	home     string
	dist     string
	chart    string // the release's chart, file name
	archive  string // the release's linux/amd64 kubectl-slipway archive, file name
	path     string
	clusters map[string]*testenv.ControlPlane
}

func (w *world) deployment(cluster, ns, name string) *appsv1.Deployment {
	w.t.Helper()
	d, err := w.clusters[cluster].Client().AppsV1().Deployments(ns).Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatalf("%s: deployment %s/%s: %v", cluster, ns, name, err)
	}
	return d
}

func (w *world) node(name string) *corev1.Node {
	w.t.Helper()
	n, err := w.clusters["release"].Client().CoreV1().Nodes().Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func lastArg(d *appsv1.Deployment) string {
	a := d.Spec.Template.Spec.Containers[0].Args
	if len(a) == 0 {
		return ""
	}
	return a[len(a)-1]
}

// node is the name NODE and $NODE stand for.
const node = "node-a"

func rules() []*rule {
	kubelets := "needs kubelets that run the pods; the VM suite installs Slipway on real kubelets and waits for the operator and every agent (e2e/harness)"
	return []*rule{
		// README.md: build, install, try one node, set the policy.
		{page: "README.md", re: `^make release `, mode: makeN},
		{page: "README.md", re: `^skopeo copy `, mode: excused, why: "no registry is reachable here; the digest it must preserve is the one install.yaml pins", test: "TestManifestsPinTheDigest"},
		{page: "README.md", re: `^mkdir -p ~/.local/bin && tar -xzf dist/kubectl-slipway_`, mode: run, check: func(w *world) {
			if fi, err := os.Stat(filepath.Join(w.home, ".local", "bin", "kubectl-slipway")); err != nil || fi.Mode()&0o111 == 0 {
				w.t.Errorf("~/.local/bin/kubectl-slipway: %v %v", fi, err)
			}
		}},
		{page: "README.md", re: `^kubectl apply --dry-run=client -f dist/install.yaml && kubectl apply -f dist/install.yaml$`, mode: run, cluster: "release", check: func(w *world) {
			w.deployment("release", "slipway-system", "slipway-update-operator")
		}},
		{page: "README.md", re: `^helm install slipway dist/slipway-`, mode: run, cluster: "helm", check: func(w *world) {
			w.deployment("helm", "slipway-system", "slipway-update-operator")
		}},
		{page: "README.md", re: `^kubectl slipway pause --nodes all --except NODE `, mode: run, cluster: "release", check: func(w *world) {
			if w.node("node-b").Annotations[protocol.RebootPaused] != protocol.True || w.node(node).Annotations[protocol.RebootPaused] == protocol.True {
				w.t.Errorf("after pause --nodes all --except %s: %s %v, node-b %v", node, node, w.node(node).Annotations, w.node("node-b").Annotations)
			}
		}},
		{page: "README.md", re: `^kubectl annotate node NODE --overwrite `, mode: run, cluster: "release", check: func(w *world) {
			if w.node(node).Annotations[protocol.RebootNeeded] != protocol.True {
				w.t.Errorf("%s not annotated reboot-needed", node)
			}
		}},
		{page: "README.md", re: `^kubectl slipway resume && kubectl slipway status -w$`, mode: until, cluster: "release"},
		{page: "README.md", re: `^kubectl slipway pause --reason "policy next" && kubectl slipway resume --nodes all$`, mode: run, cluster: "release", check: func(w *world) {
			if _, held := w.node("node-b").Annotations[protocol.RebootPaused]; held {
				w.t.Errorf("node-b still held after resume --nodes all: %v", w.node("node-b").Annotations)
			}
		}},
		{page: "README.md", re: `^kubectl -n slipway-system set env deployment/slipway-update-operator UPDATE_OPERATOR_REBOOT_WINDOW=`, mode: run, cluster: "release", check: func(w *world) {
			env := w.deployment("release", "slipway-system", "slipway-update-operator").Spec.Template.Spec.Containers[0].Env
			if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool {
				return e.Name == "UPDATE_OPERATOR_REBOOT_WINDOW" && e.Value == "Mon-Fri 22:00-05:00 Europe/Berlin"
			}) {
				w.t.Errorf("the operator's env after set env: %v", env)
			}
		}},
		{page: "README.md", re: `^kubectl -n slipway-system patch deployment/slipway-update-operator --type=json -p `, mode: run, cluster: "release", check: func(w *world) {
			if a := lastArg(w.deployment("release", "slipway-system", "slipway-update-operator")); a != "--max-unavailable=10%" {
				w.t.Errorf("the operator's last argument after the patch: %q", a)
			}
		}},
		{page: "README.md", re: `^helm upgrade slipway dist/slipway-[^ ]+ -n slipway-system --reuse-values --set operator.maxUnavailable=10% `, mode: run, cluster: "helm", check: func(w *world) {
			args := strings.Join(w.deployment("helm", "slipway-system", "slipway-update-operator").Spec.Template.Spec.Containers[0].Args, "\n")
			if !strings.Contains(args, "--max-unavailable=10%") || !strings.Contains(args, "Mon-Fri 22:00-05:00 Europe/Berlin") {
				w.t.Errorf("the operator's args after helm upgrade: %s", args)
			}
		}},
		{page: "README.md", re: `^kubectl slipway resume$`, mode: run, cluster: "release"},
		{page: "README.md", re: `^make (test|demo|unit) `, mode: makeN},

		// docs/install.md.
		{page: "docs/install.md", re: `^make demo DEMO_FLAGS=-stay$`, mode: makeN},
		{page: "docs/install.md", re: `^kubectl apply --dry-run=client -f install.yaml && kubectl apply -f install.yaml$`, mode: run, cluster: "release", dir: "dist"},
		{page: "docs/install.md", re: `^sudo systemctl mask --now locksmithd.service`, mode: excused, why: "runs on a Flatcar node; the VM suite's nodes get the same unit change and it is checked on a real systemd", test: "TestNodeConfigOnRealSystemd"},
		{page: "docs/install.md", re: `^cp -r deploy/examples/install deploy/examples/my-slipway `, mode: run},
		{page: "docs/install.md", re: `^kubectl apply --dry-run=client -k deploy/examples/my-slipway/ && kubectl apply -k deploy/examples/my-slipway/$`, mode: run, cluster: "release", check: func(w *world) {
			img := w.deployment("release", "slipway-system", "slipway-update-operator").Spec.Template.Spec.Containers[0].Image
			if !strings.HasPrefix(img, "YOUR-REGISTRY/slipway:") {
				w.t.Errorf("the operator's image after applying the copy of the example: %s", img)
			}
		}},
		{page: "docs/install.md", re: `^helm install slipway deploy/helm/slipway --namespace slipway-system --create-namespace `, mode: run, cluster: "helm2", check: func(w *world) {
			if img := w.deployment("helm2", "slipway-system", "slipway-update-operator").Spec.Template.Spec.Containers[0].Image; img != "YOUR-REGISTRY/slipway:vX.Y.Z" {
				w.t.Errorf("the operator's image after helm install: %s", img)
			}
		}},
		{page: "docs/install.md", re: `^helm upgrade slipway deploy/helm/slipway --namespace slipway-system --reuse-values --set fleetlock.enabled=true$`, mode: run, cluster: "helm2", check: func(w *world) {
			ds, err := w.clusters["helm2"].Client().AppsV1().DaemonSets("slipway-system").List(w.ctx, metav1.ListOptions{})
			if err != nil || !slices.ContainsFunc(ds.Items, func(d appsv1.DaemonSet) bool { return strings.Contains(d.Name, "fleetlock") }) {
				w.t.Errorf("no FleetLock DaemonSet after helm upgrade --set fleetlock.enabled=true: %v", err)
			}
		}},
		{page: "docs/install.md", re: `^kubectl -n slipway-system rollout status (deployment|daemonset)/slipway-update-`, mode: excused, why: kubelets, test: "TestRebootOneNodeWithPDB"},
		{page: "docs/install.md", re: `^kubectl slipway status `, mode: run, cluster: "release"},
		{page: "docs/install.md", re: `^kubectl -n slipway-system get configmap slipway-fleet-record slipway-history -o yaml > slipway-memory.yaml$`, mode: run, cluster: "release", before: func(w *world) {
			// What a running operator keeps there.
			for name, data := range map[string]map[string]string{
				"slipway-fleet-record": {"record": `{"failures":[{"node":"gone-node","reason":"stalled","at":"2026-11-01T00:00:00Z"}]}`},
				"slipway-history":      {"history": "[]"},
			} {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "slipway-system"}, Data: data}
				if _, err := w.clusters["release"].Client().CoreV1().ConfigMaps("slipway-system").Create(w.ctx, cm, metav1.CreateOptions{}); err != nil {
					w.t.Fatal(err)
				}
			}
		}}, // in the work directory: dist/ is the release's, and hack/release checks it holds nothing else
		{page: "docs/install.md", re: `^kubectl apply -f slipway-memory.yaml$`, mode: run, cluster: "release", before: func(w *world) {
			// "... reinstall ...": the namespace's ConfigMaps are gone.
			for _, name := range []string{"slipway-fleet-record", "slipway-history"} {
				if err := w.clusters["release"].Client().CoreV1().ConfigMaps("slipway-system").Delete(w.ctx, name, metav1.DeleteOptions{}); err != nil {
					w.t.Fatal(err)
				}
			}
		}, check: func(w *world) {
			cm, err := w.clusters["release"].Client().CoreV1().ConfigMaps("slipway-system").Get(w.ctx, "slipway-fleet-record", metav1.GetOptions{})
			if err != nil || !strings.Contains(cm.Data["record"], "gone-node") {
				w.t.Errorf("the fleet record after applying the saved copy: %v %v", cm, err)
			}
		}},
		{page: "docs/install.md", re: `^kubectl apply -f node-prep.yaml$`, mode: run, cluster: "release", dir: "dist"},
		{page: "docs/install.md", re: `^kubectl -n slipway-system rollout status daemonset/slipway-node-prep `, mode: excused, why: kubelets, test: "TestNodePrepDaemonSet"},
		{page: "docs/install.md", re: `^kubectl -n slipway-system get pods -l app.kubernetes.io/name=slipway-node-prep -o wide `, mode: run, cluster: "release"},
		{page: "docs/install.md", re: `^kubectl -n slipway-system logs POD -c apply `, mode: excused, why: "POD is one of node-prep's pods, which need kubelets", test: "TestNodePrepDaemonSet"},
		{page: "docs/install.md", re: `^kubectl delete -f node-prep.yaml `, mode: run, cluster: "release", dir: "dist"},
		{page: "docs/install.md", re: `^(scp bin/update-agent core@node:|ssh core@node )`, mode: excused, why: "runs on a Flatcar node over SSH; update-agent node-config apply is run on a VM's real systemd", test: "TestNodeConfigOnRealSystemd"},

		// docs/concepts.md: FLUO's own test, by hand.
		{page: "docs/concepts.md", re: `^kubectl annotate node \$NODE --overwrite `, mode: run, cluster: "release"},

		// docs/migrate.md: FLUO's images swapped (FLUO v0.9.0's own manifests applied first).
		{page: "docs/migrate.md", re: `^kubectl -n reboot-coordinator (set image|scale) `, mode: run, cluster: "helm2", before: installFLUO},
		{page: "docs/migrate.md", re: `^kubectl -n reboot-coordinator rollout status `, mode: excused, why: kubelets, test: "TestAgentRolledMidCycle"},

		// docs/development.md, docs/performance.md: make targets; fleetbench's help.
		{page: "docs/development.md", re: `^make `, mode: makeN},
		{page: "docs/performance.md", re: `^make bench-fleet`, mode: makeN},
		{page: "docs/performance.md", re: `^\(cd e2e && go run ./cmd/fleetbench -h\)`, mode: run, dir: "repo"},

		// docs/versions.md: an update-operator command line.
		{page: "docs/versions.md", re: `^update-operator --proof-url=`, mode: parse},
	}
}

var fluoInstalled bool

// installFLUO applies FLUO v0.9.0's own example manifests (from its module) to helm2, once.
func installFLUO(w *world) {
	if fluoInstalled {
		return
	}
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/flatcar/flatcar-linux-update-operator@v0.9.0")
	cmd.Dir, cmd.Env = w.t.TempDir(), append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var m struct{ Dir string }
	if err != nil || json.Unmarshal(out, &m) != nil || m.Dir == "" {
		w.t.Fatalf("FLUO v0.9.0 from the module proxy: %v %s", err, out)
	}
	kubectl(w, "helm2", "apply", "-k", filepath.Join(m.Dir, "examples", "deploy"))
	fluoInstalled = true
}

func kubectl(w *world, cluster string, args ...string) {
	w.t.Helper()
	cmd := exec.Command("kubectl", args...)
	cmd.Env = w.env(cluster)
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
}

func (w *world) env(cluster string) []string {
	env := append(os.Environ(), "HOME="+w.home, "PATH="+w.path, "NODE="+node, "KUBECACHEDIR="+filepath.Join(w.home, ".kube", "cache"))
	if cp := w.clusters[cluster]; cp != nil {
		env = append(env, "KUBECONFIG="+cp.Kubeconfig)
	} else {
		env = append(env, "KUBECONFIG="+filepath.Join(w.home, "no-cluster"))
	}
	return env
}

// Pages in the order a newcomer reads them; every other page is read after them.
var pageOrder = []string{"README.md", "docs/install.md", "docs/concepts.md", "docs/migrate.md", "docs/development.md", "docs/performance.md", "docs/versions.md"}

// Every shell command the README and docs/ show runs as written against the release hack/release
// built (SLIPWAY_DIST; its TestRelease runs this test with the bundle it made), or has a rule saying
// why it cannot here and which test proves it instead.
func TestDocumentedCommands(t *testing.T) {
	testenv.NeedRealParts(t, "a release bundle, control planes, kubectl and helm")
	dist := os.Getenv("SLIPWAY_DIST")
	if dist == "" {
		t.Skip("SLIPWAY_DIST is not set: hack/release's TestRelease (the release stage of make test) runs this test with the release bundle it built")
	}
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := &world{t: t, ctx: ctx, repo: repo, work: t.TempDir(), home: t.TempDir(), dist: dist, clusters: map[string]*testenv.ControlPlane{}}
	for _, glob := range []*string{&w.chart, &w.archive} {
		pattern := map[*string]string{&w.chart: "slipway-*.tgz", &w.archive: "kubectl-slipway_*_linux_amd64.tar.gz"}[glob]
		m, _ := filepath.Glob(filepath.Join(dist, pattern))
		if len(m) != 1 {
			t.Fatalf("%s in %s: %v", pattern, dist, m)
		}
		*glob = filepath.Base(m[0])
	}
	// The work directory: a copy of deploy/ (the kustomize example is copied into it) and dist/.
	if err := os.CopyFS(filepath.Join(w.work, "deploy"), os.DirFS(filepath.Join(repo, "deploy"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dist, filepath.Join(w.work, "dist")); err != nil {
		t.Fatal(err)
	}
	// Tools: the control plane's kubectl, helm built from the module deploy/helmtest pins, update-operator.
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(tools, "helm"), "helm.sh/helm/v4/cmd/helm")
	build.Dir = filepath.Join(repo, "deploy", "helmtest")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building helm: %v\n%s", err, out)
	}
	if _, err := operatorproc.Build(ctx, tools, ""); err != nil {
		t.Fatal(err)
	}
	w.path = strings.Join([]string{filepath.Join(w.home, ".local", "bin"), tools, bin, os.Getenv("PATH")}, string(os.PathListSeparator))
	for _, name := range []string{"release", "helm", "helm2"} {
		cp, err := testenv.StartControlPlane(ctx, filepath.Join(t.TempDir(), name), testenv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cp.Stop)
		w.clusters[name] = cp
	}
	for _, name := range []string{node, "node-b"} {
		if _, err := testenv.CreateNode(ctx, w.clusters["release"].Client(), name, name+"-boot", nil); err != nil {
			t.Fatal(err)
		}
	}

	// Every command of every page, in reading order.
	pages, err := docPages(repo)
	if err != nil {
		t.Fatal(err)
	}
	rs := rules()
	for _, page := range pages {
		text, err := os.ReadFile(filepath.Join(repo, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range Commands(page, string(text)) {
			var match []*rule
			for _, r := range rs {
				if r.page == c.Page && regexp.MustCompile(r.re).MatchString(c.Text) {
					match = append(match, r)
				}
			}
			if len(match) != 1 {
				t.Errorf("%s:%d: `%s` matches %d rules of this guard, want exactly one: run it here, or say why it cannot and which test proves it", c.Page, c.Line, c.Text, len(match))
				continue
			}
			w.do(match[0], c)
		}
	}
	for _, r := range rs {
		if r.used == 0 {
			t.Errorf("rule %s %q matches no documented command: the page changed; mend the rule", r.page, r.re)
		}
	}
}

// docPages are README.md and docs/**/*.md, the reading order first.
func docPages(repo string) ([]string, error) {
	out := slices.Clone(pageOrder)
	err := filepath.WalkDir(filepath.Join(repo, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, _ := filepath.Rel(repo, p)
		if !slices.Contains(out, rel) {
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}

// substitute fills in what a reader fills in: the release's file names, a node's name.
func (w *world) substitute(s string) string {
	s = regexp.MustCompile(`kubectl-slipway_v0\.4\.0_linux_amd64\.tar\.gz`).ReplaceAllString(s, w.archive)
	s = regexp.MustCompile(`dist/slipway-0\.4\.0\.tgz`).ReplaceAllString(s, "dist/"+w.chart)
	return regexp.MustCompile(`(^|[^$\w])NODE\b`).ReplaceAllString(s, "${1}"+node) // $NODE is the shell's: NODE is in its environment
}

func (w *world) do(r *rule, c Command) {
	t := w.t
	t.Helper()
	r.used++
	where := fmt.Sprintf("%s:%d `%s`", c.Page, c.Line, c.Text)
	if r.mode == excused {
		if !testExists(w.repo, r.test) {
			t.Errorf("%s: excused (%s) by %s, which is no test of this repository", where, r.why, r.test)
		}
		t.Logf("not run here: %s: %s; proven by %s", where, r.why, r.test)
		return
	}
	if r.before != nil {
		r.before(w)
	}
	text := w.substitute(c.Text)
	dir := map[string]string{"": w.work, "dist": w.dist, "repo": w.repo}[r.dir]
	switch r.mode {
	case makeN:
		// make -n still runs recipe lines that name $(MAKE): make test's stage wrapper among them, which
		// would append to the stage list of the make test this may run inside; STAGES points it away.
		text = regexp.MustCompile(`^make `).ReplaceAllString(text, "make -n STAGES="+filepath.Join(w.home, "stages.txt")+" ")
		dir = w.repo
	case parse:
		text += " --version"
	}
	timeout := 5 * time.Minute
	if r.mode == until {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir, cmd.Env = dir, w.env(r.cluster)
	// The whole process group ends with it (bash may fork the command: a watch would outlive bash).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	switch {
	case r.mode == until && ctx.Err() == nil:
		t.Errorf("%s: ended after %s (%v), want it to run until stopped:\n%s", where, time.Since(start).Round(time.Millisecond), err, out.String())
	case r.mode == until && !strings.Contains(out.String(), "Fleet:"):
		t.Errorf("%s: printed no status in %s:\n%s", where, timeout, out.String())
	case r.mode != until && err != nil:
		t.Errorf("%s: %v\n%s", where, err, out.String())
	default:
		t.Logf("ran %s (%s, %s)", where, r.cluster, time.Since(start).Round(time.Millisecond))
		if r.check != nil {
			r.check(w)
		}
	}
}

// testExists reports whether a Go test named name is declared anywhere in the repository.
func testExists(repo, name string) bool {
	if name == "" {
		return false
	}
	out, _ := exec.Command("git", "-C", repo, "grep", "-l", "func "+name+"(t \\*testing.T)", "--", "*_test.go").Output()
	return len(bytes.TrimSpace(out)) > 0
}
