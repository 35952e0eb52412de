package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// PoolLabel is the kubelet label that puts a simulated node in a pool (Config.Pools).
const PoolLabel = "chaos.slipway.dev/pool"

// createPools installs the RebootPolicy CRD as the installs ship it and one RebootPolicy per pool
// (its maxUnavailable from Config.Pools), and tells the referee.
func (r *runner) createPools(ctx context.Context, names []string) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if err := testenv.InstallCRDs(ctx, r.cp.RestConfig(), filepath.Join(root, "deploy/base/crd")); err != nil {
		return fmt.Errorf("installing the RebootPolicy CRD: %w", err)
	}
	dyn, err := dynamic.NewForConfig(r.cp.RestConfig())
	if err != nil {
		return err
	}
	var said []string
	for _, name := range names {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "RebootPolicy",
			"metadata": map[string]interface{}{"name": name},
			"spec": map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{PoolLabel: name}},
				"maxUnavailable": int64(r.cfg.Pools[name])}}}
		if _, err := dyn.Resource(v1alpha1.Resource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating RebootPolicy %s: %w", name, err)
		}
		said = append(said, fmt.Sprintf("%s (maxUnavailable %d)", name, r.cfg.Pools[name]))
	}
	r.check.Pools(PoolLabel, r.cfg.Pools)
	if r.cfg.UpgradeFrom == "" {
		r.check.JudgePools()
	}
	r.say("RebootPolicies %s over the nodes round robin (label %s); the referee judges each pool's budget%s", strings.Join(said, ", "), PoolLabel,
		map[bool]string{true: " once the operators are upgraded (the previous release knows no pools)", false: ""}[r.cfg.UpgradeFrom != ""])
	return nil
}

// versionEditor edits the pools' versions.deny during the run: now and then it denies the release a
// node will stage next (release(k+1)) in one pool and lifts the deny 2-6 s later. Nodes of that pool
// that staged it wait (blocked-by version) and go once it is lifted; a node admitted before an edit
// keeps its decision. Every edit's generation and deny list go to the referee, which judges each grant
// by the generation its node's pin names (referee.Version). Only once no operator of the release
// before pools runs (it knows no versions), and only with pools.
func (r *runner) versionEditor(ctx context.Context, rng *rand.Rand) {
	if len(r.cfg.Pools) == 0 || r.cfg.VersionEditEvery <= 0 {
		return
	}
	for r.cfg.UpgradeFrom != "" && !r.upgraded.Load() {
		if testenv.WaitCtx(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
	dyn, err := dynamic.NewForConfig(r.cp.RestConfig())
	if err != nil {
		r.say("version edits off: %v", err)
		return
	}
	pools := slices.Sorted(maps.Keys(r.cfg.Pools))
	deny := func(ctx context.Context, pool string, versions []string) error {
		body, _ := json.Marshal(map[string]interface{}{"spec": map[string]interface{}{"versions": map[string]interface{}{"deny": versions}}})
		u, err := dyn.Resource(v1alpha1.Resource).Patch(ctx, pool, types.MergePatchType, body, metav1.PatchOptions{})
		if err != nil {
			return err
		}
		r.check.DenyVersions(pool, u.GetGeneration(), versions)
		return nil
	}
	// lift takes a deny back, retrying through API server and etcd restarts: one left in force would
	// hold that pool's nodes for good.
	lift := func(ctx context.Context, pool string) {
		for {
			err := deny(ctx, pool, []string{})
			if err == nil || ctx.Err() != nil {
				return
			}
			r.say("lifting the deny of %s failed (the API server may be restarting), retrying: %v", pool, err)
			if testenv.WaitCtx(ctx, time.Second) != nil {
				return
			}
		}
	}
	var denied string // the pool whose deny is in force, lifted before returning
	defer func() {
		if denied != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			lift(ctx, denied)
		}
	}()
	for {
		if testenv.WaitCtx(ctx, r.cfg.VersionEditEvery/2+time.Duration(rng.Int64N(int64(r.cfg.VersionEditEvery)))) != nil {
			return
		}
		n := r.nodes[rng.IntN(len(r.nodes))]
		n.mu.Lock()
		v := release(n.staged + 1)
		n.mu.Unlock()
		pool := pools[rng.IntN(len(pools))]
		denied = pool // set before: a patch that failed may still have been applied
		if err := deny(ctx, pool, []string{v}); err != nil {
			if ctx.Err() == nil {
				r.say("version edit of %s failed (the API server may be restarting): %v", pool, err)
			}
		} else {
			r.versionEdits.Add(1)
		}
		if testenv.WaitCtx(ctx, 2*time.Second+time.Duration(rng.Int64N(int64(4*time.Second)))) != nil {
			return
		}
		lift(ctx, pool)
		if ctx.Err() == nil {
			denied = ""
		}
	}
}
