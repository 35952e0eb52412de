// Package httpserve runs an HTTP server on a listener until a context ends, with the timeouts,
// connection cap and graceful shutdown every Slipway endpoint wants.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
	"k8s.io/klog/v2"
)

// Limits bound what one client can hold of a server. Without them a client that sends its headers or
// body a byte at a time, or keeps idle connections open, holds a goroutine and a socket for ever;
// enough of them exhaust the process.
type Limits struct {
	// ReadHeaderTimeout and ReadTimeout bound reading the request's headers, and headers plus body.
	ReadHeaderTimeout, ReadTimeout time.Duration
	// WriteTimeout bounds handling the request and writing the reply; 0 means none (large downloads).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no next request.
	IdleTimeout time.Duration
	// MaxConns caps connections open at once; more wait in the kernel's accept queue.
	MaxConns int
	// MaxHeaderBytes caps the request headers.
	MaxHeaderBytes int
}

// DefaultLimits suit small JSON APIs and probes: every request of ours fits in a few KiB and answers
// in well under a second.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       10 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       60 * time.Second,
	MaxConns:          256,
	MaxHeaderBytes:    16 << 10,
}

// Serve serves h on ln with DefaultLimits in the background; it shuts down (2 s grace) when ctx ends.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log klog.Logger) {
	ServeWith(ctx, ln, h, log, DefaultLimits)
}

// ServeWith is Serve with other limits.
func ServeWith(ctx context.Context, ln net.Listener, h http.Handler, log klog.Logger, l Limits) {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
	if l.MaxConns > 0 {
		ln = netutil.LimitListener(ln, l.MaxConns)
	}
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
