package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPlanReset(t *testing.T) {
	in := resetInputs{
		starts:    map[int32]int64{0: 10, 1: 0, 2: 5},
		ends:      map[int32]int64{0: 100, 1: 50, 2: 5},
		byTime:    map[int32]int64{0: 40, 1: -1, 2: -1},
		committed: map[int32]int64{0: 60, 1: 2},
	}
	for _, tc := range []struct {
		name   string
		parts  []int32
		target resetTarget
		want   string // partition=offset ..., or the error's start
	}{
		{"earliest", nil, resetTarget{kind: resetEarliest}, "0=10 1=0 2=5"},
		{"latest", nil, resetTarget{kind: resetLatest}, "0=100 1=50 2=5"},
		{"an offset kept within each log", nil, resetTarget{kind: resetOffset, value: 7}, "0=10 1=7 2=5"},
		{"a time: the first offset at or after it, else the end", nil, resetTarget{kind: resetTime, value: 1}, "0=40 1=50 2=5"},
		{"back by 5 from the committed offset", []int32{0, 1}, resetTarget{kind: resetShift, value: -5}, "0=55 1=0"},
		{"forward past the end stops there", []int32{0}, resetTarget{kind: resetShift, value: 1000}, "0=100"},
		{"some partitions", []int32{2, 0}, resetTarget{kind: resetLatest}, "2=5 0=100"},
		{"a shift with nothing committed", nil, resetTarget{kind: resetShift, value: 1}, "error: cannot shift the offsets of t partition(s) 2"},
		{"a partition the topic lacks", []int32{0, 7}, resetTarget{kind: resetEarliest}, "error: topic t has 3 partitions: no partition 7"},
	} {
		out, err := planReset("t", tc.parts, tc.target, in)
		var got []string
		for _, o := range out {
			got = append(got, fmt.Sprintf("%d=%d", o.GetPartition(), o.GetOffset()))
		}
		g := strings.Join(got, " ")
		if err != nil {
			g = "error: " + err.Error()
		}
		if !strings.HasPrefix(g, tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, g, tc.want)
		}
	}
}

func TestResetOffsetsArguments(t *testing.T) {
	for _, tc := range []struct {
		in    string
		topic string
		parts string
		bad   bool
	}{
		{"orders", "orders", "[]", false},
		{"orders:2,0", "orders", "[0 2]", false},
		{"orders:1,1", "", "", true},
		{"orders:x", "", "", true},
		{"orders:-1", "", "", true},
	} {
		topic, parts, err := parseTopicSpec(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && (topic != tc.topic || fmt.Sprint(parts) != tc.parts)) {
			t.Errorf("--topic %q: %q %v %v", tc.in, topic, parts, err)
		}
	}

	utc := func(s string) int64 { v, _ := time.Parse(time.RFC3339Nano, s); return v.UnixMilli() }
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"2026-12-06T10:00:00Z", utc("2026-12-06T10:00:00Z")},
		{"2026-12-06T10:00:00.250+01:00", utc("2026-12-06T09:00:00.25Z")},
		{"2026-12-06T10:00:00", time.Date(2026, 12, 6, 10, 0, 0, 0, time.Local).UnixMilli()},
		{"yesterday", -1},
	} {
		got, err := parseDatetime(tc.in)
		if (tc.want < 0) != (err != nil) || (err == nil && got != tc.want) {
			t.Errorf("--to-datetime %q: %d %v, want %d", tc.in, got, err, tc.want)
		}
	}

	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"PT15M", 15 * time.Minute},
		{"P1DT2H30M", 26*time.Hour + 30*time.Minute},
		{"P2D", 48 * time.Hour},
		{"PT1.5S", 1500 * time.Millisecond},
		{"90m", 90 * time.Minute},
		{"P", -1},
		{"PT", -1},
		{"P1DT", -1},
		{"-5m", -1},
		{"soon", -1},
	} {
		got, err := parseDuration(tc.in)
		if (tc.want < 0) != (err != nil) || (err == nil && got != tc.want) {
			t.Errorf("--by-duration %q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}
