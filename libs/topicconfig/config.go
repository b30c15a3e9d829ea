package topicconfig

import (
	"strconv"
	"strings"
	"sync"
)

// Config is the typed form of a topic's configuration, for the keys Skein
// acts on. Durations are milliseconds, named as Kafka names them.
type Config struct {
	CleanupDelete          bool   // cleanup.policy contains delete
	CleanupCompact         bool   // cleanup.policy contains compact
	CompressionType        string // compression.type
	DeleteRetentionMS      int64
	FlushMessages          int64
	FlushMS                int64
	IndexIntervalBytes     int32
	MaxMessageBytes        int32
	LogAppendTime          bool    // message.timestamp.type=LogAppendTime
	TimestampBeforeMaxMS   int64   // message.timestamp.before.max.ms
	TimestampAfterMaxMS    int64   // message.timestamp.after.max.ms
	MinCompactionLagMS     int64   // min.compaction.lag.ms
	MaxCompactionLagMS     int64   // max.compaction.lag.ms
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio
	MinInsyncReplicas      int32
	RetentionBytes         int64 // -1 = unlimited
	RetentionMS            int64 // -1 = forever
	SegmentBytes           int32
	SegmentMS              int64
	UncleanLeaderElection  bool
}

// Defaults is the Config of a topic with no overrides. It is parsed from
// the key table once: producers ask for it per record.
func Defaults() Config { return defaults() }

var defaults = sync.OnceValue(func() Config {
	c, err := Parse(nil)
	if err != nil {
		panic(err) // the table's defaults are valid; TestDefaultsValid holds it
	}
	return c
})

// Parse validates overrides (see Validate) and returns the effective Config.
func Parse(overrides map[string]string) (Config, error) {
	if err := Validate(overrides); err != nil {
		return Config{}, err
	}
	v := Effective(overrides)
	long := func(n string) int64 { x, _ := strconv.ParseInt(strings.TrimSpace(v[n]), 10, 64); return x }
	boolean := func(n string) bool { b, _ := parseBool(v[n]); return b }
	double := func(n string) float64 { x, _ := strconv.ParseFloat(strings.TrimSpace(v[n]), 64); return x }
	c := Config{
		CompressionType:        strings.TrimSpace(v["compression.type"]),
		DeleteRetentionMS:      long("delete.retention.ms"),
		FlushMessages:          long("flush.messages"),
		FlushMS:                long("flush.ms"),
		IndexIntervalBytes:     int32(long("index.interval.bytes")),
		MaxMessageBytes:        int32(long("max.message.bytes")),
		LogAppendTime:          strings.TrimSpace(v["message.timestamp.type"]) == "LogAppendTime",
		TimestampBeforeMaxMS:   long("message.timestamp.before.max.ms"),
		TimestampAfterMaxMS:    long("message.timestamp.after.max.ms"),
		MinCompactionLagMS:     long("min.compaction.lag.ms"),
		MaxCompactionLagMS:     long("max.compaction.lag.ms"),
		MinCleanableDirtyRatio: double("min.cleanable.dirty.ratio"),
		MinInsyncReplicas:      int32(long("min.insync.replicas")),
		RetentionBytes:         long("retention.bytes"),
		RetentionMS:            long("retention.ms"),
		SegmentBytes:           int32(long("segment.bytes")),
		SegmentMS:              long("segment.ms"),
		UncleanLeaderElection:  boolean("unclean.leader.election.enable"),
	}
	for _, p := range splitList(v["cleanup.policy"]) {
		switch p {
		case "delete":
			c.CleanupDelete = true
		case "compact":
			c.CleanupCompact = true
		}
	}
	return c, nil
}
