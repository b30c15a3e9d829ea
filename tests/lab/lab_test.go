//go:build integration

package lab

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"skein/tests/e2e"
)

// logWriter collects a demo's report for the test log.
type logWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func runDemo(t *testing.T, name string, short bool) *Outcome {
	t.Helper()
	bin, err := e2e.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	w := &logWriter{}
	start := time.Now()
	out, err := Run(ctx, name, Options{BinDir: bin, Out: w, Short: short})
	t.Logf("demo %s (%v):\n%s", name, time.Since(start).Round(100*time.Millisecond), w.b.String())
	if err != nil {
		t.Fatalf("demo %s: %v", name, err)
	}
	return out
}

// The acks=all leader crash loses no acknowledged record, and the audit
// finds no anomaly.
func TestDemoAcksAll(t *testing.T) {
	out := runDemo(t, "acks-all", false)
	if out.Acknowledged < 200 {
		t.Errorf("%d acknowledged, want at least 200", out.Acknowledged)
	}
	if out.Lost != 0 || !out.Audit.Valid() {
		t.Errorf("%d lost of %d acknowledged; audit:\n%s", out.Lost, out.Acknowledged, out.Audit)
	}
}

// With two of three replicas stopped, the leader refuses acks=all with
// NOT_ENOUGH_REPLICAS while acks=1 is acknowledged, and nothing refused
// reaches the log.
func TestDemoMinISR(t *testing.T) {
	out := runDemo(t, "min-isr", true)
	// Three batches of 5 go straight to the leader; the first may still
	// meet a leader that has not yet applied the shrink.
	if n := out.FailedWith("NOT_ENOUGH_REPLICAS"); n < 5 {
		t.Errorf("%d records refused with NOT_ENOUGH_REPLICAS, want at least 5 (failed: %v)", n, out.Failed)
	}
	// 10 before the stop, 15 acks=1 during it, 5 acks=all after the heal.
	if out.Acknowledged != 30 {
		t.Errorf("%d acknowledged, want 30", out.Acknowledged)
	}
	if out.Lost != 0 || !out.Audit.Valid() {
		t.Errorf("%d lost; audit:\n%s", out.Lost, out.Audit)
	}
}
