// Package httpserve runs an HTTP server on a listener until a context ends, with the timeouts and
// graceful shutdown every Slipway endpoint wants.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Serve serves h on ln in the background; it shuts down (2 s grace) when ctx ends.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log klog.Logger) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "HTTP server stopped", "address", ln.Addr().String())
		}
	}()
}
