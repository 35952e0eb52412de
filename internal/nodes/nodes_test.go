package nodes

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
)

func node(rv string, ann map[string]string, unsched bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv, Annotations: ann, Labels: map[string]string{"l": "1"}}}
	n.Spec.Unschedulable = unsched
	return n
}

func TestPatchOnlyDifferences(t *testing.T) {
	n := node("5", map[string]string{"a": "1", "b": "2"}, false)
	var p Patch
	p.SetAnnotation(n, "a", "1") // unchanged: not sent
	p.SetAnnotation(n, "b", "3")
	p.DeleteAnnotation(n, "gone") // absent: not sent
	p.DeleteAnnotation(n, "a")
	p.SetLabel(n, "l", "1")
	p.DeleteLabel(n, "l")
	p.SetUnschedulable(n, false) // unchanged
	p.ResourceVersion = "5"
	b, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]interface{}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{"metadata": map[string]interface{}{
		"annotations":     map[string]interface{}{"b": "3", "a": nil},
		"labels":          map[string]interface{}{"l": nil},
		"resourceVersion": "5",
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("patch %s, want %v", b, want)
	}
	var empty Patch
	empty.SetAnnotation(n, "a", "1")
	empty.SetUnschedulable(n, false)
	if !empty.Empty() {
		t.Error("a patch of equal values must be empty (no write)")
	}
	var cordon Patch
	cordon.SetUnschedulable(n, true)
	if b, _ := cordon.JSON(); string(b) != `{"spec":{"unschedulable":true}}` {
		t.Errorf("cordon patch %s", b)
	}
	// Taints: the whole list, only when it differs; an emptied list is sent as [].
	tainted := node("6", nil, false)
	tainted.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	var same Patch
	same.SetTaints(tainted, []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}})
	same.SetTaints(n, nil)
	if !same.Empty() {
		t.Errorf("equal taint lists must send nothing: %v", same.Taints)
	}
	var untaint Patch
	untaint.SetTaints(tainted, nil)
	untaint.SetUnschedulable(tainted, true)
	if b, _ := untaint.JSON(); string(b) != `{"spec":{"taints":[],"unschedulable":true}}` {
		t.Errorf("untaint patch %s", b)
	}
	var taint Patch
	taint.SetTaints(n, []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}})
	if b, _ := taint.JSON(); string(b) != `{"spec":{"taints":[{"key":"k","effect":"PreferNoSchedule"}]}}` {
		t.Errorf("taint patch %s", b)
	}
}

func TestOverlay(t *testing.T) {
	o := NewOverlay()
	cached := node("10", nil, false)
	written := node("12", map[string]string{"k": "v"}, true)
	o.Wrote(written)
	if got := o.View(cached); got != written {
		t.Error("a newer own write must win over an older cache")
	}
	o.Observed(node("11", nil, false)) // an older event: keep the write
	if got := o.View(node("11", nil, false)); got != written {
		t.Error("an event older than the write must not drop it")
	}
	o.Observed(node("12", nil, false))
	newer := node("13", nil, false)
	if got := o.View(newer); got != newer {
		t.Error("once the informer caught up, the cache wins")
	}
	o.Wrote(node("20", nil, false))
	o.Wrote(node("15", nil, false)) // out of order: the newer stays
	if got := o.View(node("14", nil, false)); got.ResourceVersion != "20" {
		t.Errorf("view rv %s, want 20", got.ResourceVersion)
	}
	o.Deleted("n")
	if got := o.View(node("14", nil, false)); got.ResourceVersion != "14" {
		t.Error("deleted node still overlaid")
	}
	// A write to the machine that had this name before is never the view of the one that has it now,
	// however the resource versions compare.
	mine := node("30", nil, false)
	mine.UID = "old-machine"
	o.Wrote(mine)
	other := node("25", nil, false)
	other.UID = "new-machine"
	if got := o.View(other); got != other {
		t.Error("a write to another machine under the same name was taken as its view")
	}
}

func TestStrip(t *testing.T) {
	n := node("1", nil, false)
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}, SizeBytes: 1}}
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	n.Status.NodeInfo = corev1.NodeSystemInfo{BootID: "b", MachineID: "m", OSImage: "Flatcar", KernelVersion: "6.6"}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}}
	n.Spec = corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}},
		PodCIDR: "10.1.0.0/24", PodCIDRs: []string{"10.1.0.0/24"}, ProviderID: "aws:///x"}
	n.Status.Phase = corev1.NodeRunning
	n.Status.Conditions = append([]corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Message: "kubelet has sufficient memory available"}}, n.Status.Conditions...)
	readyBefore := protocol.NodeReady(n)
	out, _ := Strip(n)
	s := out.(*corev1.Node)
	if s.Status.Images != nil || s.ManagedFields != nil || s.Status.Capacity != nil || s.Status.Allocatable != nil || s.Status.Addresses != nil || s.Status.Phase != "" {
		t.Errorf("strip left what nobody reads: %+v", s.Status)
	}
	if s.Spec.PodCIDR != "" || s.Spec.PodCIDRs != nil || s.Spec.ProviderID != "" || !s.Spec.Unschedulable || len(s.Spec.Taints) != 1 {
		t.Errorf("spec after strip: %+v (want unschedulable and taints only)", s.Spec)
	}
	// What the binaries read stays: the boot ID, the machine ID, Ready, labels, annotations, spec.unschedulable.
	if s.Status.NodeInfo != (corev1.NodeSystemInfo{BootID: "b", MachineID: "m"}) {
		t.Errorf("nodeInfo after strip: %+v", s.Status.NodeInfo)
	}
	if len(s.Status.Conditions) != 1 || s.Status.Conditions[0].Type != corev1.NodeReady || protocol.NodeReady(s) != readyBefore ||
		s.Status.Conditions[0].Message != "kubelet is posting ready status" {
		t.Errorf("conditions after strip: %+v", s.Status.Conditions)
	}
	if x, _ := Strip("not a node"); x != "not a node" {
		t.Error("non-nodes must pass through")
	}
}

// Two decoded Nodes carry separate copies of the same keys and short values; after Strip they share
// one copy (the informer cache's biggest part at scale is these maps).
func TestStripSharesKeysAndShortValues(t *testing.T) {
	decode := func(name string) *corev1.Node {
		var n corev1.Node
		doc := `{"metadata":{"name":"` + name + `","labels":{"kubernetes.io/os":"linux"},"annotations":{"flatcar-linux-update.v1.flatcar-linux.net/reboot-needed":"false","update.slipway.dev/boot-id":"6f1c9a8e-2b8d-4c1e-9d53-5d2c8f0e7a41"}},` +
			`"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}]}}`
		if err := json.Unmarshal([]byte(doc), &n); err != nil {
			t.Fatal(err)
		}
		out, _ := Strip(&n)
		return out.(*corev1.Node)
	}
	a, b := decode("a"), decode("b")
	key := func(m map[string]string, want string) string {
		for k := range m {
			if k == want {
				return k
			}
		}
		t.Fatalf("%s missing from %v", want, m)
		return ""
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	const needed = "flatcar-linux-update.v1.flatcar-linux.net/reboot-needed"
	if !same(key(a.Annotations, needed), key(b.Annotations, needed)) || !same(key(a.Labels, "kubernetes.io/os"), key(b.Labels, "kubernetes.io/os")) {
		t.Error("keys are not shared between nodes")
	}
	if !same(a.Annotations[needed], b.Annotations[needed]) || !same(a.Labels["kubernetes.io/os"], b.Labels["kubernetes.io/os"]) {
		t.Error("short values are not shared between nodes")
	}
	if ca, cb := a.Status.Conditions[0], b.Status.Conditions[0]; !same(ca.Message, cb.Message) || !same(ca.Reason, cb.Reason) {
		t.Error("the Ready condition's reason and message are not shared between nodes")
	}
	if a.Annotations["update.slipway.dev/boot-id"] != "6f1c9a8e-2b8d-4c1e-9d53-5d2c8f0e7a41" {
		t.Errorf("a long value changed: %v", a.Annotations)
	}
}
