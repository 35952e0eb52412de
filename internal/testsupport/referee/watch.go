package referee

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Watch feeds the checker from the API server until ctx ends: Nodes (all), Pods and
// PodDisruptionBudgets (in namespace; "" for all). It is its own list+watch, not an informer: an
// informer replays a relist to its handlers one object at a time, which would make the checker see
// a mix of two moments. synced is closed once all three first lists are in.
func (c *Checker) Watch(ctx context.Context, client kubernetes.Interface, namespace string) (synced <-chan struct{}) {
	done := make(chan struct{})
	first := make(chan struct{}, 3)
	go func() {
		for i := 0; i < 3; i++ {
			select {
			case <-first:
			case <-ctx.Done():
				return
			}
		}
		close(done)
	}()
	nodes := client.CoreV1().Nodes()
	go listWatch(ctx, first,
		func(ctx context.Context) (string, error) {
			l, err := nodes.List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", err
			}
			c.ReplaceNodes(l.Items)
			return l.ResourceVersion, nil
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return nodes.Watch(ctx, o) },
		func(ev watch.Event) {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				return
			}
			if ev.Type == watch.Deleted {
				c.DeleteNode(n.Name)
			} else {
				c.ObserveNode(n)
			}
		}, nil)
	pods := client.CoreV1().Pods(namespace)
	go listWatch(ctx, first,
		func(ctx context.Context) (string, error) {
			l, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", err
			}
			c.ReplacePods(l.Items, l.ResourceVersion)
			return l.ResourceVersion, nil
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) },
		func(ev watch.Event) {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return
			}
			if ev.Type == watch.Deleted {
				c.DeletePod(p)
			} else {
				c.ObservePod(p)
			}
		}, c.PodBookmark)
	pdbs := client.PolicyV1().PodDisruptionBudgets(namespace)
	go listWatch(ctx, first,
		func(ctx context.Context) (string, error) {
			l, err := pdbs.List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", err
			}
			c.ReplacePDBs(l.Items)
			return l.ResourceVersion, nil
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pdbs.Watch(ctx, o) },
		func(ev watch.Event) {
			p, ok := ev.Object.(*policyv1.PodDisruptionBudget)
			if !ok {
				return
			}
			if ev.Type == watch.Deleted {
				c.DeletePDB(p.Namespace, p.Name)
			} else {
				c.ObservePDB(p)
			}
		}, nil)
	return done
}

// listWatch lists, then watches from the list's resourceVersion, resuming the watch from the last
// resourceVersion delivered when it breaks (an API server restart) and listing again only when the
// server says that resourceVersion is gone.
func listWatch(ctx context.Context, first chan<- struct{}, list func(context.Context) (string, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), event func(watch.Event), bookmark func(string)) {
	listed := false
	for ctx.Err() == nil {
		rv, err := list(ctx)
		if err != nil {
			pause(ctx)
			continue
		}
		if !listed {
			listed = true
			first <- struct{}{}
		}
		for ctx.Err() == nil {
			w, err := watchFn(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					break // list again
				}
				pause(ctx)
				continue
			}
			expired := false
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					if st := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(st) || apierrors.IsGone(st) {
						expired = true
					}
					break
				}
				if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
					rv = m.GetResourceVersion()
				}
				if ev.Type == watch.Bookmark {
					if bookmark != nil {
						bookmark(rv)
					}
					continue
				}
				event(ev)
			}
			w.Stop()
			if expired {
				break
			}
			pause(ctx)
		}
	}
}

func pause(ctx context.Context) {
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
