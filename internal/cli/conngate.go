package cli

import (
	"net/http"
	"sync/atomic"
)

// connGate holds a client's requests back until its first one has an answer. Requests
// that start together on a client with no connection yet (a command's first steps run at
// once) would each dial and shake hands with the API server over TLS: Go's transport
// shares a connection over HTTP/2 only once one exists. Behind the gate they share the
// first request's connection; the wait is that one request, which the new connections'
// handshakes cost anyway.
type connGate struct {
	rt      http.RoundTripper
	started atomic.Bool
	open    chan struct{}
}

// newConnGate wraps rt.
func newConnGate(rt http.RoundTripper) http.RoundTripper {
	return &connGate{rt: rt, open: make(chan struct{})}
}

// RoundTrip sends the first request at once and the others once it is answered (or
// failed: they then fail, or succeed, on their own).
func (g *connGate) RoundTrip(r *http.Request) (*http.Response, error) {
	if g.started.CompareAndSwap(false, true) {
		defer close(g.open)
		return g.rt.RoundTrip(r)
	}
	select {
	case <-g.open:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return g.rt.RoundTrip(r)
}

// WrappedRoundTripper is the transport the gate wraps, for client-go's transport
// inspection (utilnet.CloseIdleConnectionsFor, the TLS config of a proxy dialer).
func (g *connGate) WrappedRoundTripper() http.RoundTripper { return g.rt }
