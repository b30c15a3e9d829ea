package cli

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	skeinv1 "skein/gen/skein/v1"
)

// resetKind is the target of group reset-offsets, as kafka-consumer-groups
// names them.
type resetKind int

const (
	resetEarliest resetKind = iota // --to-earliest
	resetLatest                    // --to-latest
	resetOffset                    // --to-offset N
	resetTime                      // --to-timestamp MS, --to-datetime, --by-duration
	resetShift                     // --shift-by N
)

// resetTarget is where reset-offsets moves every partition it resets.
type resetTarget struct {
	kind  resetKind
	value int64 // the offset, the time (ms since the epoch) or the shift
}

// resetInputs is what a plan reads of one topic: each partition's log
// start and end, the first offset at or after the target's time (-1: none),
// and the group's committed offset (for a shift).
type resetInputs struct {
	starts, ends, byTime, committed map[int32]int64
}

// planReset answers the new offset of each of parts of topic (every
// partition when parts is empty), by Kafka's rules: an offset is kept
// within the partition's log; a time past the last record goes to the end;
// a shift moves the committed offset, and a partition without one is an
// error (there is nothing to shift).
func planReset(topic string, parts []int32, t resetTarget, in resetInputs) ([]*skeinv1.TopicPartitionOffset, error) {
	if len(parts) == 0 {
		parts = slices.Sorted(maps.Keys(in.ends))
	}
	var missing, uncommitted []string
	var out []*skeinv1.TopicPartitionOffset
	for _, p := range parts {
		start, end := in.starts[p], in.ends[p]
		if _, ok := in.ends[p]; !ok {
			missing = append(missing, strconv.Itoa(int(p)))
			continue
		}
		var o int64
		switch t.kind {
		case resetEarliest:
			o = start
		case resetLatest:
			o = end
		case resetOffset:
			o = min(max(t.value, start), end)
		case resetTime:
			if o = in.byTime[p]; o < 0 {
				o = end // no record at or after the time: the end, as Kafka
			}
		case resetShift:
			c, ok := in.committed[p]
			if !ok {
				uncommitted = append(uncommitted, strconv.Itoa(int(p)))
				continue
			}
			o = min(max(c+t.value, start), end)
		}
		out = append(out, &skeinv1.TopicPartitionOffset{Topic: topic, Partition: p, Offset: o})
	}
	switch {
	case len(missing) > 0:
		return nil, fmt.Errorf("topic %s has %d partitions: no partition %s", topic, len(in.ends), strings.Join(missing, ", "))
	case len(uncommitted) > 0:
		return nil, fmt.Errorf("cannot shift the offsets of %s partition(s) %s: the group has none committed there", topic, strings.Join(uncommitted, ", "))
	}
	return out, nil
}

// parseTopicSpec reads --topic as kafka-consumer-groups does: a topic, or
// TOPIC:P,P,... for some of its partitions.
func parseTopicSpec(s string) (string, []int32, error) {
	topic, list, scoped := strings.Cut(s, ":")
	if !scoped {
		return topic, nil, nil
	}
	var parts []int32
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 {
			return "", nil, usagef("--topic %q: want TOPIC or TOPIC:P,P,... with partition numbers, got %q", s, f)
		}
		if slices.Contains(parts, int32(n)) {
			return "", nil, usagef("--topic %q names partition %d twice", s, n)
		}
		parts = append(parts, int32(n))
	}
	slices.Sort(parts)
	return topic, parts, nil
}

// datetimeLayouts are the forms --to-datetime takes: Kafka's
// 'YYYY-MM-DDTHH:mm:SS.sss', the milliseconds optional, with a zone
// (Z, +01:00) or, without one, in the local time zone.
var datetimeLayouts = []string{"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05.000", "2006-01-02T15:04:05"}

func parseDatetime(s string) (int64, error) {
	for _, l := range datetimeLayouts {
		if t, err := time.ParseInLocation(l, s, time.Local); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, usagef("--to-datetime %q: want YYYY-MM-DDTHH:mm:SS[.sss] with an optional zone (Z, +01:00)", s)
}

// isoDuration is the ISO-8601 form of --by-duration that Kafka's tool takes
// (PnDTnHnMnS).
var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// parseDuration reads --by-duration: ISO-8601 (P1D, PT1H30M) as Kafka's
// tool, or Go's form (90m).
func parseDuration(s string) (time.Duration, error) {
	if m := isoDuration.FindStringSubmatch(s); m != nil && s != "P" && s != "PT" && !strings.HasSuffix(s, "T") {
		var d time.Duration
		for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
			if m[i+1] != "" {
				n, err := strconv.ParseInt(m[i+1], 10, 64)
				if err != nil {
					return 0, usagef("--by-duration %q: %v", s, err)
				}
				d += time.Duration(n) * unit
			}
		}
		if m[4] != "" {
			sec, err := strconv.ParseFloat(m[4], 64)
			if err != nil {
				return 0, usagef("--by-duration %q: %v", s, err)
			}
			d += time.Duration(sec * float64(time.Second))
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, usagef("--by-duration %q: want a duration back from now, as P1DT2H30M or 26h30m", s)
	}
	return d, nil
}

// resetPlan reads what planReset needs of topic and answers the plan.
func resetPlan(ctx context.Context, admin skeinv1.AdminServiceClient, committed map[string]map[int32]int64, topic string, parts []int32, t resetTarget) ([]*skeinv1.TopicPartitionOffset, error) {
	list := func(spec skeinv1.OffsetSpec, ts int64) (map[int32]int64, error) {
		resp, err := admin.ListOffsets(ctx, &skeinv1.ListOffsetsRequest{Topic: topic, Spec: spec, TimestampMs: ts})
		if err != nil {
			return nil, err
		}
		out := map[int32]int64{}
		for _, o := range resp.GetOffsets() {
			if o.GetErrorCode() != skeinv1.ErrorCode_NONE {
				return nil, fmt.Errorf("%s partition %d: %s: %s", topic, o.GetPartition(), o.GetErrorCode(), o.GetMessage())
			}
			out[o.GetPartition()] = o.GetOffset()
		}
		return out, nil
	}
	in := resetInputs{committed: committed[topic]}
	var err error
	if in.starts, err = list(skeinv1.OffsetSpec_EARLIEST, 0); err != nil {
		return nil, err
	}
	if in.ends, err = list(skeinv1.OffsetSpec_LATEST, 0); err != nil {
		return nil, err
	}
	if t.kind == resetTime {
		if in.byTime, err = list(skeinv1.OffsetSpec_TIMESTAMP, t.value); err != nil {
			return nil, err
		}
	}
	return planReset(topic, parts, t, in)
}

// committedOffsets answers the group's committed offsets by topic.
func committedOffsets(ctx context.Context, groups skeinv1.GroupServiceClient, group string) (map[string]map[int32]int64, error) {
	resp, err := groups.GetOffsets(ctx, &skeinv1.GetOffsetsRequest{Group: group})
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]int64{}
	for _, o := range resp.GetOffsets() {
		if o.GetOffset() < 0 {
			continue // assigned, nothing committed
		}
		if out[o.GetTopic()] == nil {
			out[o.GetTopic()] = map[int32]int64{}
		}
		out[o.GetTopic()][o.GetPartition()] = o.GetOffset()
	}
	return out, nil
}
