package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
)

// allNodes is the --nodes value that selects every node.
const allNodes = "all"

// parseNodeNames reads --nodes and --except: "all" or node names, comma-separated. Each name must be
// a valid Node name; "all" stands alone.
func parseNodeNames(flag, v string) ([]string, error) {
	if v == "" {
		return nil, fmt.Errorf("--%s: empty; want node names (a,b,c) or all", flag)
	}
	names := strings.Split(v, ",")
	for _, n := range names {
		if n == allNodes {
			if len(names) > 1 || flag != "nodes" {
				return nil, fmt.Errorf("--%s %q: all stands alone, and only in --nodes", flag, v)
			}
			continue
		}
		if bad := validation.IsDNS1123Subdomain(n); len(bad) > 0 {
			return nil, fmt.Errorf("--%s: node name %q: %s", flag, n, strings.Join(bad, "; "))
		}
	}
	return names, nil
}

// selectNodes are the Nodes --nodes and --except name, by name. Every name given must exist: a typo
// changes nothing rather than pausing or resuming fewer nodes than meant.
func (c *client) selectNodes(ctx context.Context, o options) ([]corev1.Node, error) {
	list, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, c.explain("listing Nodes", err)
	}
	byName := map[string]corev1.Node{}
	for _, n := range list.Items {
		byName[n.Name] = n
	}
	var missing []string
	for _, n := range append(append([]string(nil), o.nodes...), o.except...) {
		if _, ok := byName[n]; !ok && n != allNodes {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no Node named %s; nothing was changed", strings.Join(missing, ", "))
	}
	var out []corev1.Node
	for _, n := range list.Items {
		if slices.Contains(o.except, n.Name) || !slices.Contains(o.nodes, allNodes) && !slices.Contains(o.nodes, n.Name) {
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// pauseNodes sets reboot-paused on the selected nodes, with paused-by saying who, when and why, so
// resume --nodes all lifts exactly these pauses. A node already paused keeps its pause (and who set
// it); a node in its reboot cycle is left to finish it (reboot-paused would freeze it where it is,
// cordoned and drained).
func (c *client) pauseNodes(ctx context.Context, w io.Writer, o options, e env) error {
	sel, err := c.selectNodes(ctx, o)
	if err != nil {
		return err
	}
	mark := c.who(o, e) + " " + e.now().UTC().Format(time.RFC3339)
	if o.reason != "" {
		mark += ": " + o.reason
	}
	var paused, already, inCycle []string
	for _, n := range sel {
		got, err := c.decideAndPatch(ctx, n, func(n *corev1.Node) (string, map[string]*string) {
			f := protocol.Observe(n, protocol.Hooks{})
			switch {
			case f.Paused:
				return "already", nil
			case protocol.Classify(f).InCycle():
				return "in cycle", nil
			}
			return "paused", map[string]*string{protocol.RebootPaused: ptr(protocol.True), protocol.PausedBy: ptr(mark)}
		})
		if err != nil {
			return fmt.Errorf("%w (paused before it: %s)", err, orNone(paused))
		}
		switch got {
		case "already":
			already = append(already, n.Name)
		case "in cycle":
			inCycle = append(inCycle, n.Name)
		default:
			paused = append(paused, n.Name)
		}
	}
	fmt.Fprintf(w, "paused %d nodes: %s\n", len(paused), orNone(paused))
	if len(already) > 0 {
		fmt.Fprintf(w, "already paused, left as they are: %s\n", nodes.Names(already, 10))
	}
	if len(inCycle) > 0 {
		fmt.Fprintf(w, "in their reboot cycle, left to finish it (pause them again after): %s\n", nodes.Names(inCycle, 10))
	}
	fmt.Fprintln(w, "They start no reboot cycle and show as blocked-by paused: node. Undo: resume --nodes all (lifts only these pauses).")
	return nil
}

// resumeNodes lifts reboot-paused from the selected nodes: with --nodes all only the pauses
// pause --nodes set (paused-by); nodes named one by one whatever set theirs.
func (c *client) resumeNodes(ctx context.Context, w io.Writer, o options) error {
	sel, err := c.selectNodes(ctx, o)
	if err != nil {
		return err
	}
	byName := !slices.Contains(o.nodes, allNodes)
	var resumed, byHand []string
	for _, n := range sel {
		got, err := c.decideAndPatch(ctx, n, func(n *corev1.Node) (string, map[string]*string) {
			if !protocol.Observe(n, protocol.Hooks{}).Paused {
				return "not paused", nil
			}
			if _, ours := n.Annotations[protocol.PausedBy]; !ours && !byName {
				return "by hand", nil
			}
			return "resumed", map[string]*string{protocol.RebootPaused: nil, protocol.PausedBy: nil}
		})
		if err != nil {
			return fmt.Errorf("%w (resumed before it: %s)", err, orNone(resumed))
		}
		switch got {
		case "by hand":
			byHand = append(byHand, n.Name)
		case "resumed":
			resumed = append(resumed, n.Name)
		}
	}
	fmt.Fprintf(w, "resumed %d nodes: %s\n", len(resumed), orNone(resumed))
	if len(byHand) > 0 {
		fmt.Fprintf(w, "left paused (paused by hand, not by pause --nodes; name them to resume them): %s\n", nodes.Names(byHand, 10))
	}
	return nil
}

// decideAndPatch writes what decide says for the Node (nil: nothing), conditionally on the Node as it
// was read: a Node changed meanwhile (a kubelet's status, an agent's or the operator's keys; on a big
// fleet, often) is read again and decided again, never overwritten, up to conflictRetries times.
// It returns decide's verdict on the Node it wrote, or last read.
func (c *client) decideAndPatch(ctx context.Context, n corev1.Node, decide func(*corev1.Node) (string, map[string]*string)) (string, error) {
	for attempt := 0; ; attempt++ {
		verdict, set := decide(&n)
		if set == nil {
			return verdict, nil
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": n.ResourceVersion, "annotations": set}})
		if err != nil {
			return "", err
		}
		_, err = c.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, body, metav1.PatchOptions{})
		switch {
		case err == nil:
			return verdict, nil
		case !apierrors.IsConflict(err):
			return "", c.explain("patching Node "+n.Name, err)
		case attempt == conflictRetries:
			return "", fmt.Errorf("Node %s kept changing while this ran (%d tries); run the command again", n.Name, conflictRetries+1)
		}
		fresh, err := c.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return "", c.explain("reading Node "+n.Name+" again", err)
		}
		n = *fresh
	}
}

// conflictRetries: how often decideAndPatch reads a changed Node again before it gives up.
const conflictRetries = 4

func ptr(s string) *string { return &s }

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return nodes.Names(names, 10)
}
