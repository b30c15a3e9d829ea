package fetcher

import (
	"errors"
	"testing"
	"time"

	"skein/services/storage/internal/partition"
)

// A failure to apply answers that repeats every round is logged when it
// first comes, when its message changes, and once a minute while it
// lasts; a success forgets it.
func TestRepeatedFailureIsLoggedOnceAMinute(t *testing.T) {
	th := &thread{}
	tp, other := partition.TP{Topic: "t"}, partition.TP{Topic: "u"}
	t0 := time.Unix(1000, 0)
	damaged, gone := errors.New("CORRUPT_MESSAGE: batch at 2"), errors.New("KAFKA_STORAGE_ERROR: disk")
	for _, tc := range []struct {
		tp   partition.TP
		err  error
		at   time.Duration
		want bool
	}{
		{tp, damaged, 0, true},
		{tp, damaged, 100 * time.Millisecond, false},
		{other, damaged, 200 * time.Millisecond, true},
		{tp, damaged, 59 * time.Second, false},
		{tp, gone, 59500 * time.Millisecond, true},
		{tp, gone, 2 * time.Minute, true},
		{tp, nil, 121 * time.Second, false},
		{tp, gone, 122 * time.Second, true},
	} {
		if got := th.shouldLog(tc.tp, tc.err, t0.Add(tc.at)); got != tc.want {
			t.Errorf("%v %v at +%v: logged %v, want %v", tc.tp, tc.err, tc.at, got, tc.want)
		}
	}
}
