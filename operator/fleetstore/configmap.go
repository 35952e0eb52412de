package fleetstore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// storeRetries: how often storeConfigMap reads a ConfigMap again after losing a race for it.
const storeRetries = 3

// storeConfigMap writes keys of ConfigMap name in Slipway's namespace, the fleet's memory (the fleet
// record and its versions, the history): decide gets the ConfigMap as stored (nil: there is none) and
// returns the keys to set and their values (none: leave it as it is); other keys are kept. The write is conditional on the
// resourceVersion decide saw, and a create when there was none; one that lost a race (changed,
// created or deleted meanwhile) reads the ConfigMap again and asks decide again, so what another
// leader or a person wrote is merged, never overwritten. cm is what the caller holds; unknown says
// it must be read first. It returns the ConfigMap as stored now, as far as it knows: what it wrote, or
// what decide last saw when it wrote nothing.
func (s *Store) storeConfigMap(ctx context.Context, name string, cm *corev1.ConfigMap, unknown bool,
	decide func(stored *corev1.ConfigMap) (values map[string]string, err error)) (*corev1.ConfigMap, error) {
	cms := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.Namespace)
	read := func() (*corev1.ConfigMap, error) {
		got, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", s.cfg.Namespace, name, err)
		}
		return got, nil
	}
	var err error
	if unknown {
		if cm, err = read(); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		values, err := decide(cm)
		if err != nil {
			return nil, err
		}
		if len(values) == 0 {
			return cm, nil
		}
		var out *corev1.ConfigMap
		if cm == nil {
			out, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.cfg.Namespace,
				Labels: map[string]string{"app.kubernetes.io/part-of": "slipway"}}, Data: values}, metav1.CreateOptions{})
		} else {
			next := cm.DeepCopy()
			if next.Data == nil {
				next.Data = map[string]string{}
			}
			for k, v := range values {
				next.Data[k] = v
			}
			out, err = cms.Update(ctx, next, metav1.UpdateOptions{}) // conditional on cm.ResourceVersion
		}
		if err == nil {
			return out, nil
		}
		if !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) || attempt == storeRetries {
			return nil, fmt.Errorf("writing ConfigMap %s/%s: %w", s.cfg.Namespace, name, err)
		}
		if cm, err = read(); err != nil {
			return nil, err
		}
	}
}
