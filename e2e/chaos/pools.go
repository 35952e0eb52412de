package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
