package topicconfig

import (
	"math"
	"strconv"
	"strings"
)

// CreateTimes is the window of create times a topic accepts:
// message.timestamp.before.max.ms and message.timestamp.after.max.ms
// around the leader's clock, under message.timestamp.type=CreateTime (a
// LogAppendTime topic stamps its own time and checks none).
type CreateTimes struct {
	Check         bool  // false: every create time is accepted
	Before, After int64 // milliseconds
}

// CreateTimesOf answers the window of a parsed config.
func CreateTimesOf(c Config) CreateTimes {
	return CreateTimes{
		Check:  !c.LogAppendTime && (c.TimestampBeforeMaxMS < math.MaxInt64 || c.TimestampAfterMaxMS < math.MaxInt64),
		Before: c.TimestampBeforeMaxMS, After: c.TimestampAfterMaxMS,
	}
}

// CreateTimesFrom reads the window from a topic's overrides as metadata
// carries them (validated when they were set), without parsing the rest.
func CreateTimesFrom(overrides map[string]string) CreateTimes {
	w := CreateTimes{Before: math.MaxInt64, After: math.MaxInt64}
	if strings.TrimSpace(overrides["message.timestamp.type"]) == "LogAppendTime" {
		return w
	}
	for _, f := range []struct {
		key string
		to  *int64
	}{{"message.timestamp.before.max.ms", &w.Before}, {"message.timestamp.after.max.ms", &w.After}} {
		if v, ok := overrides[f.key]; ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
				*f.to = n
			}
		}
	}
	w.Check = w.Before < math.MaxInt64 || w.After < math.MaxInt64
	return w
}

// At answers the earliest and latest create time accepted at now (Unix
// milliseconds), held at the int64 bounds rather than wrapping.
func (w CreateTimes) At(now int64) (earliest, latest int64) {
	if !w.Check {
		return math.MinInt64, math.MaxInt64
	}
	earliest, latest = now-w.Before, now+w.After
	if w.After == math.MaxInt64 || latest < now {
		latest = math.MaxInt64
	}
	if w.Before == math.MaxInt64 || earliest > now {
		earliest = math.MinInt64
	}
	return earliest, latest
}
