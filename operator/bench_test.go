package operator_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// okWatcher timestamps every transition of a node's reboot-ok to "true", as a watch delivers it.
func okWatcher(b *testing.B) (map[string]chan time.Time, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	chans := map[string]chan time.Time{}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			granted := n.Annotations[protocol.RebootOK] == protocol.True
			if granted && !seen[n.Name] {
				if ch, found := chans[n.Name]; found {
					select {
					case ch <- time.Now():
					default:
					}
				}
			}
			seen[n.Name] = granted
		}
	}()
	return chans, cancel
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// BenchmarkSignalToRebootOK measures, on the real apiserver with real agents over real D-Bus and
// nothing to drain, the time from a locksmithctl-style StatusUpdate signal to the watch delivering
// reboot-ok=true. Run with -benchtime 1x: each run takes a fixed sample of full cycles.
func BenchmarkSignalToRebootOK(b *testing.B) {
	needCluster(b)
	const samples = 100
	cleanup := []func(){}
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	nodes := benchNodes(b, "lat", 5)
	for _, sn := range nodes {
		cleanup = append(cleanup, sn.Stop)
	}
	chans, stopWatch := okWatcher(b)
	defer stopWatch()
	for _, sn := range nodes {
		chans[sn.Name] = make(chan time.Time, 1)
	}
	stop := benchOperator(b, "5")
	defer stop()
	time.Sleep(time.Second) // the operator's informer has synced
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for s := 0; s < samples; s++ {
			sn := nodes[s%len(nodes)]
			// Quiescent: every earlier cycle has finished. (While another node's cycle is still
			// settling, the drain's consistent pod LIST can wait ~100 ms for the apiserver's watch
			// cache to catch up with etcd.)
			for _, other := range nodes {
				waitFinished(b, other.Name, other.Boots())
			}
			start := time.Now()
			if err := sn.SendNeedReboot(); err != nil {
				b.Fatal(err)
			}
			select {
			case at := <-chans[sn.Name]:
				lat = append(lat, at.Sub(start))
			case <-time.After(30 * time.Second):
				b.Fatalf("%s: no reboot-ok within 30s", sn.Name)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(percentile(lat, 1).Microseconds())/1000, "max-ms")
}

// waitFinished waits until the node is idle again after boots reboots.
func waitFinished(b *testing.B, name string, boots int) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			f := protocol.Observe(n, protocol.Hooks{})
			if protocol.Classify(f) == protocol.Idle && !n.Spec.Unschedulable && (boots == 0 || n.Annotations[protocol.LastRebootTime] != "") {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("%s never became idle", name)
}

// BenchmarkIdleFleetWrites counts, from the apiserver's own request metrics, the mutating API
// requests an idle fleet of 100 nodes (100 real agents over 100 real dbus-daemons, plus the operator)
// causes in one minute, on every resource but the apiserver's own endpoints and leases. Every
// mutating request is logged by resource. The target is zero.
func BenchmarkIdleFleetWrites(b *testing.B) {
	needCluster(b)
	nodes := benchNodes(b, "idle", 100)
	defer func() {
		for _, sn := range nodes {
			sn.Stop()
		}
	}()
	stop := benchOperator(b, "10%")
	defer stop()
	time.Sleep(5 * time.Second) // let every start-up write land
	window := time.Minute
	b.ResetTimer()
	var writes, nodeWrites float64
	for i := 0; i < b.N; i++ {
		before, beforeNodes, byBefore := mutatingRequests(b)
		time.Sleep(window)
		after, afterNodes, byAfter := mutatingRequests(b)
		for k, v := range byAfter {
			if d := v - byBefore[k]; d > 0 {
				b.Logf("%s: %.0f", k, d)
			}
		}
		writes += after - before
		nodeWrites += afterNodes - beforeNodes
	}
	b.StopTimer()
	b.ReportMetric(writes/float64(b.N)/window.Minutes(), "writes/min")
	b.ReportMetric(nodeWrites/float64(b.N)/window.Minutes(), "node-writes/min")
}

// mutatingRequests sums apiserver_request_total over POST/PUT/PATCH/DELETE/APPLY, all resources and
// for nodes alone.
func mutatingRequests(b *testing.B) (all, nodes float64, by map[string]float64) {
	by = map[string]float64{}
	req, _ := http.NewRequest(http.MethodGet, cp.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+cp.Token)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		b.Fatal("apiserver_request_total not found")
	}
	for _, m := range fam.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		v := m.GetCounter().GetValue()
		by[labels["verb"]+" "+labels["group"]+"/"+labels["resource"]+"/"+labels["subresource"]] += v
		// The apiserver's own bookkeeping (its endpoints reconciler and identity lease, 12/min) is
		// not the fleet's doing. The operator runs without leader election here; with it, its Lease
		// renewal adds one PUT per --retry-period.
		if labels["resource"] == "endpoints" || labels["resource"] == "leases" {
			continue
		}
		all += v
		if labels["resource"] == "nodes" {
			nodes += v
		}
	}
	return all, nodes, by
}
