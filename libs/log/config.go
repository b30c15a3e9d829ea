package log

import (
	"math"

	"skein/libs/topicconfig"
)

// CleanupPolicy is cleanup.policy as bits: delete, compact, or both.
type CleanupPolicy uint8

const (
	CleanupDelete  CleanupPolicy = 1 << iota // retention deletes old segments
	CleanupCompact                           // compaction keeps the newest record per key
)

// Config is the part of a topic's configuration the log acts on. Sizes are
// bytes and durations milliseconds, as Kafka's config names say.
type Config struct {
	SegmentBytes       int64 // segment.bytes: roll when the active segment would pass this
	SegmentMS          int64 // segment.ms: roll when the active segment's records span longer
	IndexIntervalBytes int64 // index.interval.bytes: bytes between offset index entries
	FlushMessages      int64 // flush.messages: fsync once this many offsets are unflushed
	FlushMS            int64 // flush.ms: FlushIfDue fsyncs once this long has passed
	RetentionMS        int64 // retention.ms: -1 keeps segments forever
	RetentionBytes     int64 // retention.bytes: -1 is unlimited
	CleanupPolicy      CleanupPolicy
	DeleteRetentionMS  int64 // delete.retention.ms: how long compaction keeps tombstones
	MaxMessageBytes    int64 // max.message.bytes: largest batch Append accepts
	LogAppendTime      bool  // message.timestamp.type=LogAppendTime
	// CreateTimes bounds how far before and after the leader's clock a
	// record's create time may be (message.timestamp.before.max.ms and
	// message.timestamp.after.max.ms); a zero Config bounds neither.
	CreateTimes topicconfig.CreateTimes
	// When compaction runs (Kafka's log cleaner): a segment whose newest
	// record is younger than MinCompactionLagMS is not compacted yet
	// (min.compaction.lag.ms); a log is compacted once its dirty part, the
	// closed segments written since the last compaction, is at least
	// MinCleanableDirtyRatio of the compactable ones
	// (min.cleanable.dirty.ratio), or once its oldest dirty segment began
	// more than MaxCompactionLagMS ago (max.compaction.lag.ms; 0 never
	// forces it). A zero Config compacts whenever something was written
	// since the last pass.
	MinCompactionLagMS     int64
	MinCleanableDirtyRatio float64
	MaxCompactionLagMS     int64
}

// DefaultConfig is Kafka's defaults: 1 GiB / 7 day segments, 4 KiB index
// interval, no forced fsync, 7 day retention, delete policy.
func DefaultConfig() Config { return ConfigFrom(topicconfig.Defaults()) }

// ConfigFrom takes the log's fields from a parsed topic config.
func ConfigFrom(tc topicconfig.Config) Config {
	c := Config{
		SegmentBytes:           int64(tc.SegmentBytes),
		SegmentMS:              tc.SegmentMS,
		IndexIntervalBytes:     int64(tc.IndexIntervalBytes),
		FlushMessages:          tc.FlushMessages,
		FlushMS:                tc.FlushMS,
		RetentionMS:            tc.RetentionMS,
		RetentionBytes:         tc.RetentionBytes,
		DeleteRetentionMS:      tc.DeleteRetentionMS,
		MaxMessageBytes:        int64(tc.MaxMessageBytes),
		LogAppendTime:          tc.LogAppendTime,
		CreateTimes:            topicconfig.CreateTimesOf(tc),
		MinCompactionLagMS:     tc.MinCompactionLagMS,
		MinCleanableDirtyRatio: tc.MinCleanableDirtyRatio,
		MaxCompactionLagMS:     tc.MaxCompactionLagMS,
	}
	if tc.CleanupDelete {
		c.CleanupPolicy |= CleanupDelete
	}
	if tc.CleanupCompact {
		c.CleanupPolicy |= CleanupCompact
	}
	return c
}

// ParseConfig validates a map of Kafka topic config overrides (unknown keys
// and bad values are errs.InvalidConfig; keys that are not the log's, like
// min.insync.replicas, are accepted and ignored here) and returns the log's
// Config.
func ParseConfig(overrides map[string]string) (Config, error) {
	tc, err := topicconfig.Parse(overrides)
	if err != nil {
		return Config{}, err
	}
	return ConfigFrom(tc), nil
}

// normalized repairs the fields of a hand-built Config whose zero value
// would be nonsense (a zero segment size would roll on every append). Start
// from DefaultConfig: zero retention.ms, for one, is a legal "delete now".
func (c Config) normalized() Config {
	d := DefaultConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	c.SegmentBytes = min(c.SegmentBytes, math.MaxInt32) // index positions are 32 bits
	if c.SegmentMS <= 0 {
		c.SegmentMS = d.SegmentMS
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.FlushMessages <= 0 {
		c.FlushMessages = d.FlushMessages
	}
	if c.FlushMS < 0 {
		c.FlushMS = d.FlushMS
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.CleanupPolicy == 0 {
		c.CleanupPolicy = CleanupDelete
	}
	return c
}
