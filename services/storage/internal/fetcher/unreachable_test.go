package fetcher

import (
	"testing"
	"time"

	"skein/services/storage/internal/partition"
)

// A leader is reported once its round has gone unanswered for MaxWait +
// ReportAfter, counted from when the round was sent or, when later, from
// when this process ran again after a stall of its own.
func TestUnreachableCountsFromTheResume(t *testing.T) {
	m := &Manager{cfg: Config{MaxWait: 500 * time.Millisecond, ReportAfter: time.Second}, threads: map[int32]*thread{}}
	th := &thread{}
	asked := []Silent{{TP: partition.TP{Topic: "t", Partition: 0}, Leader: 2, LeaderEpoch: 3}}
	th.asked.Store(&asked)
	sent := time.Unix(1000, 0)
	th.waiting.Store(sent.UnixNano())
	m.threads[2] = th
	for _, tc := range []struct {
		name        string
		now, resume time.Time
		want        time.Duration // -1: not reported
	}{
		{"unanswered for 1.4 s", sent.Add(1400 * time.Millisecond), time.Time{}, -1},
		{"unanswered for 1.6 s", sent.Add(1600 * time.Millisecond), time.Time{}, 1100 * time.Millisecond},
		{"10 s, the last 0.5 s after the process ran again", sent.Add(10 * time.Second), sent.Add(9500 * time.Millisecond), -1},
		{"10 s, the last 2 s after the process ran again", sent.Add(10 * time.Second), sent.Add(8 * time.Second), 1500 * time.Millisecond},
		{"a resume before the round was sent changes nothing", sent.Add(1600 * time.Millisecond), sent.Add(-time.Minute), 1100 * time.Millisecond},
	} {
		got := m.Unreachable(tc.now, tc.resume)
		switch {
		case tc.want < 0 && len(got) != 0:
			t.Errorf("%s: reported %+v", tc.name, got)
		case tc.want >= 0 && (len(got) != 1 || got[0].For != tc.want || got[0].Leader != 2 || got[0].LeaderEpoch != 3):
			t.Errorf("%s: %+v, want leader 2 at epoch 3 silent for %v", tc.name, got, tc.want)
		}
	}
}
