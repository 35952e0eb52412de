package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates (or updates) every CustomResourceDefinition in the YAML files of dir, as the
// installs ship them (deploy/base/crd), and returns once each is Established and its resource lists.
func InstallCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRD files in %s (%v)", dir, err)
	}
	return InstallCRDFiles(ctx, cfg, files...)
}

// InstallCRDFiles is InstallCRDs for the YAML files named (another project's CRD in its module, say).
func InstallCRDFiles(ctx context.Context, cfg *rest.Config, files ...string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if err := applyCRD(ctx, dyn, &obj); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	return nil
}

func applyCRD(ctx context.Context, dyn dynamic.Interface, obj *unstructured.Unstructured) error {
	crds := dyn.Resource(crdResource)
	_, err := crds.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		_, err = crds.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
	var version string // the storage version: served for certain (a CRD may list versions it no longer serves first)
	for _, v := range versions {
		if storage, _, _ := unstructured.NestedBool(v.(map[string]interface{}), "storage"); storage {
			version, _, _ = unstructured.NestedString(v.(map[string]interface{}), "name")
		}
	}
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// WaitDiscovery polls (bounded by timeout) until ready, asked with a discovery client of cfg, returns
// nil: discovery serves a new group a moment after its CRD is established.
func WaitDiscovery(cfg *rest.Config, timeout time.Duration, ready func(discovery.DiscoveryInterface) error) error {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		if err = ready(disc); err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
