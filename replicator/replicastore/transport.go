package replicastore

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// http1ClientFor is an HTTP client for cfg's API server that speaks HTTP/1.1 only. The
// replica watch is the biggest stream cmsync reads (an event per replica at a start and
// per replica written). Over HTTP/2 the client answers every 4 KiB it reads with
// flow-control frames, which the API server reads in turn: in a profiled restart with
// 100,000 replicas, a tenth of cmsync's CPU and a fifth of the API server's. HTTP/1.1
// streams the same events under TCP's own flow control. The watch holds a connection
// of its own; every other request shares the manager's HTTP/2 connection.
//
// HTTP/2 also pinged a connection that went quiet, and closed it when no answer came;
// HTTP/1.1 has no such check, so a watch whose connection died without a word (the API
// server's host gone behind a proxy that keeps the client's side open) would wait for
// events forever. silentWatches closes such a watch instead.
// In scoped mode the replica store holds a watch per namespace served, and over HTTP/1.1
// each would hold a connection of its own: watchClientFor then gives them HTTP/2,
// which carries them all over a few connections.
func watchClientFor(cfg *rest.Config, namespaces int) (*http.Client, error) {
	if namespaces > 0 {
		return rest.HTTPClientFor(cfg)
	}
	return http1ClientFor(cfg)
}

func http1ClientFor(cfg *rest.Config) (*http.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.NextProtos = []string{"http/1.1"}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &silentWatches{next: rt, after: silentWatchTimeout}
	})
	return rest.HTTPClientFor(cfg)
}

// silentWatchTimeout is how long a watch may deliver nothing before it is taken for
// dead. The API server's watch cache sends a bookmark about once a minute to a watch
// that asked for them (the reflector does), so a live watch is never silent this long;
// a watch ended this way is watched again from its last resourceVersion by the
// reflector, as after any broken watch.
const silentWatchTimeout = 2 * time.Minute

// silentWatches closes the response of a watch request once no byte of it arrived for
// the timeout. No library offers this for HTTP/1.1 (client-go relies on HTTP/2's
// health check), hence by hand.
type silentWatches struct {
	next  http.RoundTripper
	after time.Duration
}

func (s *silentWatches) RoundTrip(req *http.Request) (*http.Response, error) {
	if watch, _ := strconv.ParseBool(req.URL.Query().Get("watch")); !watch {
		return s.next.RoundTrip(req)
	}
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := s.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return resp, err
	}
	body := &watchdogBody{ReadCloser: resp.Body, cancel: cancel, after: s.after}
	// Cancelling the request's context makes the transport close the connection, which
	// ends a Read blocked on it.
	body.timer = time.AfterFunc(s.after, cancel)
	resp.Body = body
	return resp, nil
}

// watchdogBody is a watch's response body whose timer restarts with every byte read.
type watchdogBody struct {
	io.ReadCloser
	cancel context.CancelFunc
	after  time.Duration

	mu    sync.Mutex
	timer *time.Timer
}

func (b *watchdogBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.mu.Lock()
		b.timer.Reset(b.after)
		b.mu.Unlock()
	}
	return n, err
}

func (b *watchdogBody) Close() error {
	b.mu.Lock()
	b.timer.Stop()
	b.mu.Unlock()
	b.cancel()
	return b.ReadCloser.Close()
}
