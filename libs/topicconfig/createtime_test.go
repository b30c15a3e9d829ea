package topicconfig

import (
	"math"
	"testing"
)

func TestCreateTimes(t *testing.T) {
	const now = 1_000_000
	for _, tc := range []struct {
		name            string
		overrides       map[string]string
		check           bool
		earliest, latst int64
	}{
		{"defaults", nil, false, math.MinInt64, math.MaxInt64},
		{"before only", map[string]string{"message.timestamp.before.max.ms": "1000"}, true, now - 1000, math.MaxInt64},
		{"after only", map[string]string{"message.timestamp.after.max.ms": " 500 "}, true, math.MinInt64, now + 500},
		{"both zero", map[string]string{"message.timestamp.before.max.ms": "0", "message.timestamp.after.max.ms": "0"}, true, now, now},
		{"Kafka's default written out", map[string]string{"message.timestamp.before.max.ms": "9223372036854775807"}, false, math.MinInt64, math.MaxInt64},
		{"a huge bound does not wrap", map[string]string{"message.timestamp.before.max.ms": "9223372036854775806", "message.timestamp.after.max.ms": "9223372036854775806"}, true, now - math.MaxInt64 + 1, math.MaxInt64},
		{"LogAppendTime checks nothing", map[string]string{"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "0"}, false, math.MinInt64, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.overrides)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []CreateTimes{CreateTimesOf(c), CreateTimesFrom(tc.overrides)} {
				lo, hi := w.At(now)
				if w.Check != tc.check || lo != tc.earliest || hi != tc.latst {
					t.Errorf("%+v: check %v, [%d, %d]; want %v, [%d, %d]", w, w.Check, lo, hi, tc.check, tc.earliest, tc.latst)
				}
			}
		})
	}
}
