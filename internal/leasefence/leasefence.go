// Package leasefence keeps a leader that has lost its lease without noticing from
// writing.
//
// client-go's leader election tells a process it leads, but not when it stops: a
// process frozen by a long GC pause, a stopped VM or SIGSTOP wakes up still believing it
// leads, while another process has taken the lease and works. Its workers then finish
// what they decided before they slept — a replica written with content that is no
// longer the source's — before the elector's next renewal finds the lease gone. The
// Kubernetes API offers no fencing token for arbitrary writes, and no library closes
// this gap, so this package does, with the one clock a process can trust after a
// freeze: its own monotonic clock.
//
// A Fence opens when the lease is acquired or renewed, and stays open for a lease
// duration, less a margin, counted from the moment the request that renewed it was
// sent: no other candidate may take the lease before a full lease duration has passed
// since it observed that renewal, which it cannot have observed before it was sent.
// Every write cmsync sends passes the Fence's transport, which refuses it once the Fence
// is closed; reads, the lease itself and access reviews pass. A frozen leader therefore
// wakes up with its Fence closed, and its elector, finding the lease taken, stops it.
//
// What is left: a write whose body was read just before the freeze and written just
// after it (the Transport checks when a request is handed over and again at its
// body), and a request already in the network when a partition began. Neither can be
// closed without a fencing token in the API server.
package leasefence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Fence tells whether the process may still act as the leader.
type Fence struct {
	// open is how long after a renewal was sent the Fence stays open.
	open time.Duration
	now  func() time.Time

	mu sync.Mutex
	// until is when the Fence closes; time.Time keeps the monotonic reading, so a
	// change of the wall clock cannot reopen it.
	until time.Time
}

// New returns a closed Fence for a lease of leaseDuration, renewed by an elector that
// gives up after renewDeadline. It stays open for renewDeadline after each renewal is
// sent, the longest a live leader can go without renewing before its elector stops it,
// and never past the lease duration (an invalid configuration where renewDeadline is
// not below leaseDuration gets half the lease duration).
func New(leaseDuration, renewDeadline time.Duration) *Fence {
	open := renewDeadline
	if open <= 0 || open >= leaseDuration {
		open = leaseDuration / 2
	}
	return &Fence{open: open, now: time.Now}
}

// Open reports whether a write may be sent now, and if not, why.
func (f *Fence) Open() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.until.IsZero() {
		return false, "this process has not acquired the leader election lease"
	}
	if now.Before(f.until) {
		return true, ""
	}
	return false, fmt.Sprintf("the leader election lease was last renewed %s ago (writes stop %s after a renewal)",
		now.Sub(f.until.Add(-f.open)).Round(time.Millisecond), f.open)
}

// renewed opens the Fence for f.open from sent, when the lease was written with this
// process as its holder.
func (f *Fence) renewed(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if until := sent.Add(f.open); until.After(f.until) {
		f.until = until
	}
}

// close closes the Fence: the lease was released or found held by another.
func (f *Fence) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until = time.Time{}
}

// Lock wraps the elector's lock: each successful acquisition or renewal opens the
// Fence, a release closes it, and a release attempted after the Fence has closed is
// not sent at all (the lease may be another's by then; the API server would refuse the
// stale update, but a frozen leader should not even try).
func (f *Fence) Lock(inner resourcelock.Interface) resourcelock.Interface {
	return &fencedLock{Interface: inner, fence: f}
}

type fencedLock struct {
	resourcelock.Interface
	fence *Fence
}

func (l *fencedLock) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	return l.write(record, func() error { return l.Interface.Create(ctx, record) })
}

func (l *fencedLock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	return l.write(record, func() error { return l.Interface.Update(ctx, record) })
}

func (l *fencedLock) write(record resourcelock.LeaderElectionRecord, send func() error) error {
	holding := record.HolderIdentity == l.Identity()
	if !holding {
		if open, why := l.fence.Open(); !open {
			l.fence.close()
			return fmt.Errorf("not releasing the leader election lease: %s", why)
		}
		l.fence.close()
		return send()
	}
	sent := l.fence.now()
	if err := send(); err != nil {
		return err
	}
	l.fence.renewed(sent)
	return nil
}

// Transport wraps a client's transport so that every write is refused while the Fence
// is closed. Reads (GET, HEAD, and watches) always pass, as do TokenReviews and
// SubjectAccessReviews, which change nothing: the secure metrics endpoint of a process
// that does not lead still authenticates its scrapers.
//
// A request checked just before the process froze would still be sent when it wakes:
// between the check and the socket lie the HTTP/2 transport's queues and locks, time
// enough for a SIGSTOP to land (the model checker caught an Event sent that way). So
// the Fence is asked again when the transport reads the request's body, right before
// its bytes go out; refused there, the stream is reset and the API server never sees
// a complete request. Every write cmsync sends has a body.
func (f *Fence) Transport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if !isWrite(req) {
			return rt.RoundTrip(req)
		}
		if open, why := f.Open(); !open {
			return nil, &NotLeaderError{Method: req.Method, Path: req.URL.Path, Reason: why}
		}
		if req.Body != nil {
			req = req.Clone(req.Context())
			req.Body = &fencedBody{ReadCloser: req.Body, fence: f, req: req}
			if getBody := req.GetBody; getBody != nil {
				req.GetBody = func() (io.ReadCloser, error) {
					body, err := getBody()
					if err != nil {
						return nil, err
					}
					return &fencedBody{ReadCloser: body, fence: f, req: req}, nil
				}
			}
		}
		return rt.RoundTrip(req)
	})
}

// fencedBody is a write's body that the Fence checks at every read.
type fencedBody struct {
	io.ReadCloser
	fence *Fence
	req   *http.Request
}

func (b *fencedBody) Read(p []byte) (int, error) {
	if open, why := b.fence.Open(); !open {
		return 0, &NotLeaderError{Method: b.req.Method, Path: b.req.URL.Path, Reason: why}
	}
	return b.ReadCloser.Read(p)
}

// NotLeaderError is the error of a write the Fence refused.
type NotLeaderError struct {
	Method, Path, Reason string
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("not sending %s %s: %s", e.Method, e.Path, e.Reason)
}

func isWrite(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	path := req.URL.Path
	return !strings.HasPrefix(path, "/apis/authentication.k8s.io/") && !strings.HasPrefix(path, "/apis/authorization.k8s.io/")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// LeaseLock is the Lease lock controller-runtime would build for the manager —
// identity host name and a UUID, user agent "leader-election", a request timeout of half
// the renew deadline so one hung request cannot cost the lease — built here so that it
// can be fenced. Its client does not go through the Fence. Events about the lease need
// a recorder: set LockConfig.EventRecorder once the manager exists.
func LeaseLock(cfg *rest.Config, namespace, name string, renewDeadline time.Duration) (*resourcelock.LeaseLock, error) {
	if namespace == "" {
		return nil, errors.New("no leader election namespace given and not running in a Pod")
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(renewDeadline/2, time.Second)
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:     coordination,
		LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())},
	}, nil
}
