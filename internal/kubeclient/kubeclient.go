// Package kubeclient builds the client configuration both binaries use, and exposes klog's verbosity
// on a binary's own flag set.
package kubeclient

import (
	"flag"
	"fmt"
	"net/http"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// RestConfig uses kubeconfig, else $KUBECONFIG, else the in-cluster service account, with the
// client-side rate limit lim and a deadline on every request but a watch (lim.Timeout).
func RestConfig(kubeconfig, userAgent string, lim Limits) (*rest.Config, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			err = fmt.Errorf("%w (outside a cluster, pass --kubeconfig)", err)
		}
	}
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = userAgent
	cfg.QPS, cfg.Burst = float32(lim.QPS), lim.Burst
	timeout := lim.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return deadlineTransport{rt: rt, timeout: timeout} })
	return cfg, nil
}

// AddLogFlags adds klog's -v to fs.
func AddLogFlags(fs *flag.FlagSet) {
	k := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(k)
	fs.Var(k.Lookup("v").Value, "v", "log verbosity (0: cycle steps; 1: patches; 2: waits)")
}
