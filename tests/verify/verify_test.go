//go:build integration

package verify

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"skein/tests/e2e"
)

type logWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// The short schedule: every fault kind once, in the order seed 1 gives,
// and no anomaly in any row.
func TestShortScheduleHasNoAnomaly(t *testing.T) {
	bin, err := e2e.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	w := &logWriter{}
	start := time.Now()
	rep, err := Run(t.Context(), Options{BinDir: bin, Out: w, Seed: 1, Duration: 0})
	t.Logf("skein-verify (%v):\n%s", time.Since(start).Round(100*time.Millisecond), w.b.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rep.Rows {
		if row.Anomalies() > 0 {
			t.Errorf("%s: %d anomalies", row.Kind, row.Anomalies())
		}
	}
	for _, p := range rep.Problems {
		t.Errorf("problem: %s", p)
	}
	if !rep.Valid() {
		t.Errorf("the audit is not valid:\n%s", rep.Audit)
	}
	want := len(Kinds)
	if os.Geteuid() != 0 {
		want-- // no disk-full: it mounts a tmpfs
	}
	if len(rep.Faults) != want {
		t.Errorf("%d faults applied, want %d (each kind once)", len(rep.Faults), want)
	}
}
