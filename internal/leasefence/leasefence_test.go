package leasefence

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// lockStub records what the elector sent; it stands in for the Lease, not for
// behaviour under test (the Fence's decisions are).
type lockStub struct {
	resourcelock.Interface
	sent []string
	err  error
}

func (l *lockStub) Identity() string { return "me" }
func (l *lockStub) Create(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	l.sent = append(l.sent, "create:"+r.HolderIdentity)
	return l.err
}
func (l *lockStub) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	l.sent = append(l.sent, "update:"+r.HolderIdentity)
	return l.err
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newFence(c *clock) *Fence {
	f := New(15*time.Second, 10*time.Second)
	f.now = c.now
	return f
}

func TestFenceFollowsTheLease(t *testing.T) {
	ctx := context.Background()
	me := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}
	release := resourcelock.LeaderElectionRecord{}
	tests := []struct {
		name     string
		steps    func(c *clock, lock resourcelock.Interface, stub *lockStub)
		wantOpen bool
		wantWhy  string
		wantSent []string
	}{
		{"closed before the lease is acquired", func(*clock, resourcelock.Interface, *lockStub) {}, false, "has not acquired", nil},
		{"open after the lease is acquired", func(_ *clock, l resourcelock.Interface, _ *lockStub) { _ = l.Create(ctx, me) }, true, "", []string{"create:me"}},
		{"open while renewals keep coming", func(c *clock, l resourcelock.Interface, _ *lockStub) {
			_ = l.Create(ctx, me)
			for range 20 {
				c.advance(2 * time.Second)
				_ = l.Update(ctx, me)
			}
		}, true, "", nil},
		{
			"closed a renew deadline after the last renewal was sent, though the process still thinks it leads",
			func(c *clock, l resourcelock.Interface, _ *lockStub) {
				_ = l.Create(ctx, me)
				c.advance(10 * time.Second)
			},
			false,
			"last renewed 10s ago",
			nil,
		},
		{"a frozen leader wakes up closed", func(c *clock, l resourcelock.Interface, _ *lockStub) {
			_ = l.Update(ctx, me)
			c.advance(40 * time.Second)
		}, false, "last renewed 40s ago", nil},
		{"a failed renewal does not open it", func(c *clock, l resourcelock.Interface, s *lockStub) {
			s.err = errors.New("conflict")
			_ = l.Update(ctx, me)
		}, false, "has not acquired", nil},
		{"renewal counts from when it was sent, not answered", func(c *clock, l resourcelock.Interface, s *lockStub) {
			_ = l.Update(ctx, me) // sent at 0
			c.advance(9 * time.Second)
			s.err = errors.New("timeout")
			_ = l.Update(ctx, me)
			c.advance(time.Second)
		}, false, "last renewed 10s ago", nil},
		{"a release closes it and is sent while open", func(_ *clock, l resourcelock.Interface, _ *lockStub) {
			_ = l.Create(ctx, me)
			_ = l.Update(ctx, release)
		}, false, "has not acquired", []string{"create:me", "update:"}},
		{"a release after it closed is not sent", func(c *clock, l resourcelock.Interface, _ *lockStub) {
			_ = l.Create(ctx, me)
			c.advance(30 * time.Second)
			_ = l.Update(ctx, release)
		}, false, "has not acquired", []string{"create:me"}},
		{"reacquired after a takeover and release", func(c *clock, l resourcelock.Interface, _ *lockStub) {
			_ = l.Create(ctx, me)
			c.advance(30 * time.Second)
			_ = l.Update(ctx, me)
		}, true, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: time.Now()}
			f := newFence(c)
			stub := &lockStub{}
			tt.steps(c, f.Lock(stub), stub)
			open, why := f.Open()
			if open != tt.wantOpen || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("Open() = %v, %q; want %v, containing %q", open, why, tt.wantOpen, tt.wantWhy)
			}
			if tt.wantSent != nil && strings.Join(stub.sent, ",") != strings.Join(tt.wantSent, ",") {
				t.Errorf("sent %v, want %v", stub.sent, tt.wantSent)
			}
		})
	}
}

func TestNewKeepsTheFenceInsideTheLease(t *testing.T) {
	for _, tt := range []struct{ lease, renew, want time.Duration }{
		{15 * time.Second, 10 * time.Second, 10 * time.Second},
		{15 * time.Second, 15 * time.Second, 7500 * time.Millisecond},
		{15 * time.Second, 0, 7500 * time.Millisecond},
	} {
		if got := New(tt.lease, tt.renew).open; got != tt.want {
			t.Errorf("New(%s, %s) stays open %s, want %s", tt.lease, tt.renew, got, tt.want)
		}
	}
}

func TestTransportRefusesOnlyWritesWhileClosed(t *testing.T) {
	var served []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, r.Method+" "+r.URL.Path)
	}))
	defer server.Close()
	c := &clock{t: time.Now()}
	f := newFence(c)
	client := &http.Client{Transport: f.Transport(http.DefaultTransport)}
	send := func(method, path string) error {
		req, _ := http.NewRequest(method, server.URL+path, nil)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}

	for _, tt := range []struct {
		method, path string
		refused      bool
	}{
		{http.MethodGet, "/api/v1/namespaces/a/configmaps", false},
		{http.MethodGet, "/api/v1/configmaps?watch=true", false},
		{http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", false},
		{http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews", false},
		{http.MethodPost, "/api/v1/namespaces/a/configmaps", true},
		{http.MethodPatch, "/api/v1/namespaces/a/configmaps/x", true},
		{http.MethodPut, "/api/v1/namespaces/a/configmaps/x", true},
		{http.MethodDelete, "/api/v1/namespaces/a/configmaps/x", true},
		{http.MethodPost, "/api/v1/namespaces/a/events", true},
	} {
		err := send(tt.method, tt.path)
		var notLeader *NotLeaderError
		if refused := errors.As(err, &notLeader); refused != tt.refused {
			t.Errorf("closed: %s %s refused=%v (err %v), want %v", tt.method, tt.path, refused, err, tt.refused)
		}
	}
	if len(served) != 4 {
		t.Errorf("the server saw %v, want only the 4 reads and reviews", served)
	}

	_ = f.Lock(&lockStub{}).Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if err := send(http.MethodPatch, "/api/v1/namespaces/a/configmaps/x"); err != nil {
		t.Errorf("open: a write was refused: %v", err)
	}
	c.advance(11 * time.Second)
	err := send(http.MethodPatch, "/api/v1/namespaces/a/configmaps/x")
	if err == nil || !strings.Contains(err.Error(), "not sending PATCH /api/v1/namespaces/a/configmaps/x: the leader election lease was last renewed 11s ago") {
		t.Errorf("closed again: got %v", err)
	}
	if len(served) != 5 {
		t.Errorf("the server saw %d requests, want 5", len(served))
	}
}

// A write that passed the check and then waited — as one does when the process freezes
// inside the HTTP/2 transport — is refused when its body is read, after the Fence closed:
// the server never gets the whole request.
func TestTransportRefusesABodyReadAfterTheFenceClosed(t *testing.T) {
	var received []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			received = append(received, string(body))
		}
	}))
	defer server.Close()
	c := &clock{t: time.Now()}
	f := newFence(c)
	_ = f.Lock(&lockStub{}).Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	frozen := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.advance(time.Minute) // the process sleeps between the check and the body
		return http.DefaultTransport.RoundTrip(req)
	})
	client := &http.Client{Transport: f.Transport(frozen)}
	req, _ := http.NewRequest(http.MethodPost, server.URL+"/api/v1/namespaces/a/configmaps", strings.NewReader(`{"data":{"v":"stale"}}`))
	_, err := client.Do(req)
	var notLeader *NotLeaderError
	if !errors.As(err, &notLeader) {
		t.Errorf("a write whose body is read after the fence closed: err = %v, want a NotLeaderError", err)
	}
	if len(received) != 0 {
		t.Errorf("the server received %q", received)
	}
}
