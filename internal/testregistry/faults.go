package testregistry

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushHeader marks the requests of the test's own pushes (Push,
// PushImage, PushIndex, PushTags), which a fault spares.
const pushHeader = "X-Testregistry-Push"

// SetFault makes the registry answer every request of its clients with f
// (nil: answer them again), before the handlers of Handle and after the
// latency, until the next SetFault; requests are counted as before. The
// test's own pushes are spared, so that a tag can move during an outage
// (but not while the registry is stopped, see Stop).
func (r *Registry) SetFault(f Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fault = f
}

// Status is a fault that answers every request with code and the header
// pairs given (name, value, name, value…), with no body: a 500, or a 429
// with Retry-After.
func Status(code int, header ...string) Handler {
	return func(w http.ResponseWriter, _ *http.Request) bool {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		return true
	}
}

// Hang is a fault that never answers: it holds each request until its
// client gives up or the registry closes.
func (r *Registry) Hang() Handler {
	return func(_ http.ResponseWriter, req *http.Request) bool {
		select {
		case <-req.Context().Done():
		case <-r.closed:
		}
		return true
	}
}

// HangAfterHeaders is a fault that answers a GET with the registry's
// status and headers (Content-Length and Docker-Content-Digest included)
// and half of its body, then hangs until the client gives up or the
// registry closes, as a proxy whose upstream stalls does. Other methods
// (a HEAD, whose answer is its headers) are answered as usual.
func (r *Registry) HangAfterHeaders() Handler {
	return func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method != http.MethodGet {
			return false
		}
		rec := httptest.NewRecorder()
		r.inner.ServeHTTP(rec, req)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		body := rec.Body.Bytes()
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body[:len(body)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		select {
		case <-req.Context().Done():
		case <-r.closed:
		}
		return true
	}
}

// Stop closes the registry's port and every connection to it, so that a
// client's connection is refused, as a registry that is down refuses it,
// until Start. It may be called more than once.
func (r *Registry) Stop() {
	r.listener.stop()
	r.Server.CloseClientConnections()
}

// Start listens again on the port Stop closed, so that the registry keeps
// its address; it fails the test when the port was taken meanwhile. It
// does nothing when the registry is running.
func (r *Registry) Start(t TB) {
	t.Helper()
	if err := r.listener.start(); err != nil {
		t.Fatalf("starting the registry again: %v", err)
	}
}

// switchListener is the registry's listener: one net.Listener for the
// server, in front of a TCP listener that Stop closes and Start opens
// again on the same port.
type switchListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{} // closed by Close
	once  sync.Once

	mu    sync.Mutex
	inner net.Listener // nil while stopped
}

// newSwitchListener serves the connections of l.
func newSwitchListener(l net.Listener) *switchListener {
	s := &switchListener{addr: l.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	s.inner = l
	go s.accept(l)
	return s
}

// accept hands over the connections of l until it is closed.
func (s *switchListener) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		select {
		case s.conns <- c:
		case <-s.done:
			_ = c.Close()
			return
		}
	}
}

// Accept implements net.Listener.
func (s *switchListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: for good.
func (s *switchListener) Close() error {
	s.once.Do(func() { close(s.done) })
	s.stop()
	return nil
}

// Addr implements net.Listener.
func (s *switchListener) Addr() net.Addr { return s.addr }

func (s *switchListener) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inner != nil {
		_ = s.inner.Close()
		s.inner = nil
	}
}

func (s *switchListener) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return errors.New("the registry is closed")
	default:
	}
	if s.inner != nil {
		return nil
	}
	// The port was just closed: listening again may briefly fail.
	var err error
	for range 50 {
		var l net.Listener
		if l, err = net.Listen("tcp", s.addr.String()); err == nil {
			s.inner = l
			go s.accept(l)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// pushTransport marks the test's own pushes, which faults spare.
type pushTransport struct{}

// pushBase carries the test's own pushes: a transport of their own, not
// http.DefaultTransport, whose idle connections every
// httptest.Server.Close closes. Another test's server closing in
// parallel broke a push mid-upload ("HTTP/1.x transport connection
// broken: http: CloseIdleConnections called": a PATCH is not retried).
var pushBase = http.DefaultTransport.(*http.Transport).Clone()

func (pushTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(pushHeader, "1")
	return pushBase.RoundTrip(req)
}

// pushOption is the remote option of the test's own pushes.
func pushOption() remote.Option { return remote.WithTransport(pushTransport{}) }
