package membership

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestTimingFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    Timings
		wantErr string
	}{
		{args: nil, want: FastTimings()},
		{args: []string{"--gossip-probe-interval=1s", "--gossip-probe-timeout=400ms", "--gossip-suspicion-mult=3"},
			want: func() Timings {
				d := FastTimings()
				d.ProbeInterval, d.ProbeTimeout, d.SuspicionMult = time.Second, 400*time.Millisecond, 3
				d.GossipInterval = time.Second // news follows the probes
				return d
			}()},
		{args: []string{"--gossip-probe-interval=0s"}, wantErr: "--gossip-probe-interval 0s: want a positive duration"},
		{args: []string{"--gossip-probe-interval=100ms"}, wantErr: "--gossip-probe-timeout 100ms: want a positive duration shorter than --gossip-probe-interval (100ms)"},
		{args: []string{"--gossip-probe-timeout=-1s"}, wantErr: "--gossip-probe-timeout -1s"},
		{args: []string{"--gossip-suspicion-mult=0"}, wantErr: "--gossip-suspicion-mult 0: want 1 or more"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		timings := TimingFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		got, err := timings()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case got != tc.want:
			t.Errorf("%v: timings %+v, want %+v", tc.args, got, tc.want)
		}
	}
}
