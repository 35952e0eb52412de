package testenv

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Shared is the one control plane of a test package: started by the first caller of Get or Need (so a
// run of only the package's unit tests starts nothing), stopped with its scratch directory by Close,
// which TestMain calls after m.Run. Under -short Need skips and Get returns an error.
type Shared struct {
	Options Options
	Name    string // for the scratch directory: slipway-<Name>-test-*

	once   sync.Once
	cp     *ControlPlane
	dir    string
	err    error
	cancel context.CancelFunc
}

// Get starts the control plane on first use and returns it (the same error to every caller if it
// could not start).
func (s *Shared) Get() (*ControlPlane, error) {
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "slipway-"+s.Name+"-test-"); s.err != nil {
			return
		}
		var ctx context.Context
		ctx, s.cancel = context.WithCancel(context.Background())
		s.cp, s.err = StartControlPlane(ctx, filepath.Join(s.dir, "cp"), s.Options)
	})
	return s.cp, s.err
}

// Need is Get for a test: it skips t under -short (the fast tier starts no control plane) and fails
// it when the control plane could not start.
func (s *Shared) Need(t testing.TB) *ControlPlane {
	t.Helper()
	what := "a control plane (etcd, kube-apiserver)"
	if s.Options.ControllerManager {
		what = "a control plane (etcd, kube-apiserver, kube-controller-manager)"
	}
	NeedRealParts(t, what)
	cp, err := s.Get()
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	return cp
}

// Dir is the scratch directory (for binaries a test builds), "" before Get.
func (s *Shared) Dir() string { return s.dir }

// Close stops what Get started and removes the scratch directory.
func (s *Shared) Close() {
	if s.cp != nil {
		s.cp.Stop()
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
