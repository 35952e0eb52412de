package kubeclient

import (
	"context"
	"io"
	"net/http"
	"time"
)

// DefaultTimeout bounds one API request (--kube-api-timeout) but a watch: a request the API server
// accepted and never answers (a wedged etcd, a half-open connection) must not hold a worker, and
// with it a lock or the lease, for ever.
const DefaultTimeout = 30 * time.Second

// deadlineTransport gives every request but a watch a deadline of its own, kept until its body is
// read and closed. Watches are long by design and are bounded by the API server (timeoutSeconds)
// and the informers' own restarts; client-go's rest.Config.Timeout would cut them too.
type deadlineTransport struct {
	rt      http.RoundTripper
	timeout time.Duration
}

func (t deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return t.rt.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

func isWatch(req *http.Request) bool {
	switch req.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return false
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
