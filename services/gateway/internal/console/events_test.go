package console

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSource is metadata whose version the test moves; each collect answers
// a "topics" document naming the version, and refreshes are counted.
type fakeSource struct {
	version   atomic.Uint64
	refreshes atomic.Int64
	collects  atomic.Int64
	forgets   atomic.Int64
	mu        sync.Mutex
	extra     []Event
}

func (f *fakeSource) Version() uint64 { return f.version.Load() }

func (f *fakeSource) Forget() { f.forgets.Add(1) }

func (f *fakeSource) Collect(_ context.Context, refresh bool) []Event {
	f.collects.Add(1)
	if refresh {
		f.refreshes.Add(1)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Event{{Name: "topics", Data: fmt.Appendf(nil, `{"version":%d}`, f.version.Load())}}, f.extra...)
}

// sseReader reads events off a text/event-stream body.
type sseReader struct{ sc *bufio.Scanner }

func (r *sseReader) next(t *testing.T) Event {
	t.Helper()
	var e Event
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			e.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			e.Data = []byte(strings.TrimPrefix(line, "data: "))
		case line == "" && e.Name != "":
			return e
		}
	}
	t.Fatalf("stream ended: %v", r.sc.Err())
	return e
}

func openStream(t *testing.T, url string) (*http.Response, *sseReader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return resp, &sseReader{sc: sc}
}

func newServer(t *testing.T, hub *Hub) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	Register(mux, hub, &Demos{}, nil)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		hub.Close()
		srv.Close()
	})
	return srv
}

func TestEventsFollowMetadataChanges(t *testing.T) {
	src := &fakeSource{}
	src.version.Store(1)
	hub := NewHub(HubConfig{Source: src, Interval: time.Hour, MetadataPoll: 5 * time.Millisecond})
	srv := newServer(t, hub)
	resp, r := openStream(t, srv.URL)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if e := r.next(t); e.Name != "topics" || string(e.Data) != `{"version":1}` {
		t.Fatalf("first event %s %s", e.Name, e.Data)
	}
	src.version.Store(2)
	done := make(chan Event, 1)
	go func() { done <- r.next(t) }()
	select {
	case e := <-done:
		if string(e.Data) != `{"version":2}` {
			t.Fatalf("after the change: %s", e.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event after a metadata change")
	}
	// With an hour's interval, only the first collect read the storage
	// nodes: the change was answered from the metadata alone.
	if n := src.refreshes.Load(); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
}

func TestUnchangedDocumentsAreNotResent(t *testing.T) {
	src := &fakeSource{}
	hub := NewHub(HubConfig{Source: src, Interval: 10 * time.Millisecond, MetadataPoll: 5 * time.Millisecond})
	s, err := hub.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	<-s.Events()
	deadline := time.Now().Add(time.Second)
	for src.collects.Load() < 10 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case e := <-s.Events():
		t.Fatalf("an unchanged document was sent again: %s %s", e.Name, e.Data)
	default:
	}
}

func TestNoReadsWithoutSubscribers(t *testing.T) {
	src := &fakeSource{}
	hub := NewHub(HubConfig{Source: src, Interval: time.Millisecond, MetadataPoll: time.Millisecond})
	defer hub.Close()
	s, err := hub.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	<-s.Events()
	hub.Unsubscribe(s)
	time.Sleep(20 * time.Millisecond) // the loop notices within a poll
	n := src.collects.Load()
	time.Sleep(50 * time.Millisecond)
	if m := src.collects.Load(); m != n {
		t.Fatalf("the hub went on collecting without subscribers: %d -> %d", n, m)
	}
}

// A subscriber who comes after everyone left gets the documents as they
// are now, not the last ones sent before the hub stopped collecting.
func TestLateSubscriberGetsNoStaleDocuments(t *testing.T) {
	src := &fakeSource{}
	src.version.Store(1)
	hub := NewHub(HubConfig{Source: src, Interval: time.Hour, MetadataPoll: time.Millisecond})
	defer hub.Close()
	s, err := hub.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	if e := <-s.Events(); string(e.Data) != `{"version":1}` {
		t.Fatalf("first subscriber's first event %s", e.Data)
	}
	hub.Unsubscribe(s)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		hub.mu.Lock()
		running := hub.running
		hub.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hub went on collecting without subscribers")
		}
	}
	if n := src.forgets.Load(); n != 1 {
		t.Fatalf("the source was told to forget %d times when the last subscriber left, want 1", n)
	}
	src.version.Store(2) // changed while no one watched
	s, err = hub.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-s.Events():
		if string(e.Data) != `{"version":2}` {
			t.Fatalf("a late subscriber's first event is %s, want the current {\"version\":2}", e.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event for a late subscriber")
	}
}

func TestSlowSubscriberIsDropped(t *testing.T) {
	src := &fakeSource{}
	hub := NewHub(HubConfig{Source: src, Interval: time.Hour, MetadataPoll: time.Millisecond, Buffer: 4})
	defer hub.Close()
	slow, err := hub.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	fast, err := hub.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	// The fast one reads everything; the slow one never reads.
	var fastGot atomic.Int64
	go func() {
		for {
			select {
			case <-fast.Events():
				fastGot.Add(1)
			case <-fast.Dropped():
				return
			}
		}
	}()
	for v := uint64(1); v <= 20; v++ {
		src.version.Store(v)
		deadline := time.Now().Add(2 * time.Second)
		for fastGot.Load() < int64(v) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	select {
	case <-slow.Dropped():
	case <-time.After(2 * time.Second):
		t.Fatal("the slow subscriber was not dropped")
	}
	select {
	case <-fast.Dropped():
		t.Fatal("the fast subscriber was dropped")
	default:
	}
	if got := fastGot.Load(); got < 20 {
		t.Fatalf("the fast subscriber got %d events, want 20: the slow one held the hub up", got)
	}
	if n := hub.Subscribers(); n != 1 {
		t.Fatalf("%d subscribers, want 1", n)
	}
}

// A client that stops reading its connection is dropped by the hub; the
// other streams and the hub go on.
func TestSlowHTTPClientDoesNotBlockTheHub(t *testing.T) {
	src := &fakeSource{}
	big := strings.Repeat("x", 64<<10)
	src.extra = []Event{{Name: "padding", Data: []byte(`"` + big + `"`)}}
	// Room for a few changes' events, so the reader (slow under the race
	// detector) is not dropped itself; the stalled stream still fills it.
	hub := NewHub(HubConfig{Source: src, Interval: time.Hour, MetadataPoll: time.Millisecond, Buffer: 16})
	srv := newServer(t, hub)
	// A stream nobody reads: its socket buffers fill, its handler blocks.
	stalled, _ := openStream(t, srv.URL)
	_ = stalled
	_, r := openStream(t, srv.URL)
	r.next(t)
	for v := uint64(1); v <= 200; v++ {
		src.mu.Lock()
		src.extra = []Event{{Name: "padding", Data: fmt.Appendf(nil, `"%d%s"`, v, big)}}
		src.mu.Unlock()
		src.version.Store(v)
		e := r.next(t)
		for e.Name != "topics" {
			e = r.next(t)
		}
		if want := fmt.Sprintf(`{"version":%d}`, v); string(e.Data) != want {
			for string(e.Data) != want {
				e = r.next(t)
			}
		}
		if hub.Subscribers() == 1 {
			return // the stalled stream was dropped and the reader went on
		}
	}
	t.Fatalf("the stalled stream is still subscribed after 200 changes (%d subscribers)", hub.Subscribers())
}

func TestSubscribersAreBounded(t *testing.T) {
	src := &fakeSource{}
	hub := NewHub(HubConfig{Source: src, MaxSubscribers: 2})
	srv := newServer(t, hub)
	openStream(t, srv.URL)
	openStream(t, srv.URL)
	deadline := time.Now().Add(2 * time.Second)
	for hub.Subscribers() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	resp, err := http.Get(srv.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third stream: %d, want 429", resp.StatusCode)
	}
	var body errorBody
	decodeJSON(t, resp, &body)
	if body.ErrorCode != "THROTTLING_QUOTA_EXCEEDED" || body.Code != codeResourceExhausted {
		t.Fatalf("third stream: %+v", body)
	}
}

func TestCloseEndsStreams(t *testing.T) {
	src := &fakeSource{}
	hub := NewHub(HubConfig{Source: src})
	srv := newServer(t, hub)
	_, r := openStream(t, srv.URL)
	r.next(t)
	hub.Close()
	done := make(chan struct{})
	go func() {
		for r.sc.Scan() {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end when the hub closed")
	}
}
