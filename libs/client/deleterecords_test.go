package client

import (
	"context"
	"testing"
	"time"
)

// A server's wait ends before the caller's deadline does, so that its
// answer (a partition that timed out, with the others) reaches the caller.
func TestWaitMsEndsBeforeTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // 0: none
		lo, hi   int32
	}{
		{"no deadline", 0, 30_000, 30_000},
		{"a far deadline", time.Minute, 30_000, 30_000},
		{"45 s", 45 * time.Second, 30_000, 30_000},
		{"20 s: 2 s short of it", 20 * time.Second, 17_900, 18_000},
		{"1 s: a tenth short of it", time.Second, 850, 900},
		{"past", -time.Second, 1, 1},
	} {
		ctx := context.Background()
		if tc.deadline != 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tc.deadline)
			defer cancel()
		}
		if got := waitMs(ctx, deleteRecordsWait); got < tc.lo || got > tc.hi {
			t.Errorf("%s: %d ms, want %d–%d", tc.name, got, tc.lo, tc.hi)
		}
	}
}
