package replicastore

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// streamServer answers every request with one line, then, for a watch, either goes
// silent until the client leaves (as a dead API server behind a proxy would) or sends a
// line every tick.
func streamServer(t *testing.T, tick time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		if watch, _ := strconv.ParseBool(r.URL.Query().Get("watch")); !watch {
			return
		}
		for {
			var next <-chan time.Time
			if tick > 0 {
				next = time.After(tick)
			}
			select {
			case <-r.Context().Done():
				return
			case <-next:
				_, _ = io.WriteString(w, "more\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// readAll reads the body to its end on another goroutine and reports how it ended, or
// fails the test if it has not ended within limit.
func readAll(t *testing.T, body io.Reader, limit time.Duration) (string, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := io.ReadAll(body)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return string(r.data), r.err
	case <-time.After(limit):
		t.Fatalf("the response was still open after %v", limit)
		return "", nil
	}
}

func TestASilentWatchIsClosed(t *testing.T) {
	srv := streamServer(t, 0)
	client := &http.Client{Transport: &silentWatches{next: http.DefaultTransport, after: 200 * time.Millisecond}}
	resp, err := client.Get(srv.URL + "/api/v1/configmaps?watch=1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := readAll(t, resp.Body, time.Minute)
	if err == nil || data != "first\n" {
		t.Errorf("a silent watch ended with %q and error %v; want what came before the silence, and an error", data, err)
	}
}

func TestAWatchThatDeliversStaysOpen(t *testing.T) {
	srv := streamServer(t, 20*time.Millisecond)
	client := &http.Client{Transport: &silentWatches{next: http.DefaultTransport, after: 200 * time.Millisecond}}
	resp, err := client.Get(srv.URL + "/api/v1/configmaps?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	// Read for five timeouts' worth of events: the timer restarts with each.
	lines := 0
	buf := make([]byte, 5)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); lines++ {
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			t.Fatalf("a watch that delivers was closed after %d lines: %v", lines, err)
		}
	}
	if err := resp.Body.Close(); err != nil {
		t.Errorf("closing the watch: %v", err)
	}
}

func TestOtherRequestsAreLeftAlone(t *testing.T) {
	srv := streamServer(t, 0)
	client := &http.Client{Transport: &silentWatches{next: http.DefaultTransport, after: time.Nanosecond}}
	resp, err := client.Get(srv.URL + "/api/v1/configmaps")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	time.Sleep(10 * time.Millisecond) // a watch would have been closed by now
	if data, err := readAll(t, resp.Body, time.Minute); err != nil || data != "first\n" {
		t.Errorf("a list was changed: %q, %v", data, err)
	}
}
