package topicconfig

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"skein/libs/errs"
)

// Type is the type of a config value, as Kafka's ConfigDef names them.
type Type int

const (
	Long Type = iota
	Int
	Bool
	Double
	String // one of Allowed
	List   // comma-separated, each one of Allowed, at least one
)

func (t Type) String() string {
	return [...]string{"long", "int", "boolean", "double", "string", "list"}[t]
}

// Key is one row of the table.
type Key struct {
	Name    string
	Type    Type
	Default string
	// Min and Max bound Long, Int and Double values (inclusive).
	Min, Max float64
	// Allowed lists the values of a String or List key.
	Allowed []string
	// Unused marks keys accepted for compatibility that Skein does not act
	// on (yet): setting them is harmless and they are reported back.
	Unused bool
	Doc    string
}

const maxLong = math.MaxInt64

// table is sorted by name. Defaults and bounds are Kafka's (3.x LogConfig).
var table = []Key{
	{Name: "cleanup.policy", Type: List, Default: "delete", Allowed: []string{"compact", "delete"}, Doc: "delete old segments, compact by key, or both"},
	{Name: "compression.type", Type: String, Default: "producer", Allowed: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}, Doc: "codec batches are stored with; producer keeps the producer's"},
	{Name: "delete.retention.ms", Type: Long, Default: "86400000", Min: 0, Max: maxLong, Doc: "how long tombstones survive compaction, from when their segment was closed (by the storage node's clock, not the records' timestamps)"},
	{Name: "file.delete.delay.ms", Type: Long, Default: "60000", Min: 0, Max: maxLong, Unused: true, Doc: "delay before a deleted segment's file is removed"},
	{Name: "flush.messages", Type: Long, Default: strconv.FormatInt(maxLong, 10), Min: 1, Max: maxLong, Doc: "fsync after this many messages; 1 = fsync before every append returns"},
	{Name: "flush.ms", Type: Long, Default: strconv.FormatInt(maxLong, 10), Min: 0, Max: maxLong, Doc: "fsync when this long has passed since the last one"},
	{Name: "index.interval.bytes", Type: Int, Default: "4096", Min: 0, Max: math.MaxInt32, Doc: "bytes between offset index entries"},
	{Name: "max.compaction.lag.ms", Type: Long, Default: strconv.FormatInt(maxLong, 10), Min: 1, Max: maxLong, Doc: "longest a record may stay uncompacted"},
	{Name: "max.message.bytes", Type: Int, Default: "1048588", Min: 0, Max: math.MaxInt32, Doc: "largest record batch the log accepts"},
	{Name: "message.timestamp.after.max.ms", Type: Long, Default: strconv.FormatInt(maxLong, 10), Min: 0, Max: maxLong, Doc: "how far in the future a create time may be"},
	{Name: "message.timestamp.before.max.ms", Type: Long, Default: strconv.FormatInt(maxLong, 10), Min: 0, Max: maxLong, Doc: "how far in the past a create time may be"},
	{Name: "message.timestamp.type", Type: String, Default: "CreateTime", Allowed: []string{"CreateTime", "LogAppendTime"}, Doc: "whether batches keep the producer's timestamp or get the broker's"},
	{Name: "min.cleanable.dirty.ratio", Type: Double, Default: "0.5", Min: 0, Max: 1, Doc: "dirty share of the log that triggers compaction"},
	{Name: "min.compaction.lag.ms", Type: Long, Default: "0", Min: 0, Max: maxLong, Doc: "shortest time a record stays uncompacted"},
	{Name: "min.insync.replicas", Type: Int, Default: "1", Min: 1, Max: math.MaxInt32, Doc: "in-sync replicas an acks=all produce needs"},
	{Name: "preallocate", Type: Bool, Default: "false", Unused: true, Doc: "preallocate segment files"},
	{Name: "retention.bytes", Type: Long, Default: "-1", Min: -1, Max: maxLong, Doc: "size a partition may grow to before old segments are deleted; -1 = unlimited"},
	{Name: "retention.ms", Type: Long, Default: "604800000", Min: -1, Max: maxLong, Doc: "age after which segments are deleted; -1 = forever"},
	{Name: "segment.bytes", Type: Int, Default: "1073741824", Min: 14, Max: math.MaxInt32, Doc: "size at which a segment is rolled"},
	{Name: "segment.index.bytes", Type: Int, Default: "10485760", Min: 4, Max: math.MaxInt32, Unused: true, Doc: "preallocated index size (Skein's indexes grow as needed)"},
	{Name: "segment.jitter.ms", Type: Long, Default: "0", Min: 0, Max: maxLong, Unused: true, Doc: "random jitter subtracted from segment.ms"},
	{Name: "segment.ms", Type: Long, Default: "604800000", Min: 1, Max: maxLong, Doc: "age at which a segment is rolled"},
	{Name: "unclean.leader.election.enable", Type: Bool, Default: "false", Doc: "allow an out-of-sync replica to become leader"},
}

// Keys returns the table, sorted by name.
func Keys() []Key { return slices.Clone(table) }

// Lookup returns the row for a config name.
func Lookup(name string) (Key, bool) {
	i, ok := slices.BinarySearchFunc(table, name, func(k Key, n string) int { return strings.Compare(k.Name, n) })
	if !ok {
		return Key{}, false
	}
	return table[i], true
}

// longBound is a Long or Int key's bound as an integer. The table keeps
// bounds as float64, in which math.MaxInt64 rounds up to 2^63: converted
// back as it is, that overflows int64.
func longBound(f float64) int64 {
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// Check validates one value against its key's row.
func (k Key) Check(value string) error {
	bad := func(format string, args ...any) error {
		return errs.Errorf(errs.InvalidConfig, "invalid value %s for %s: %s", errs.Quote(value), k.Name, fmt.Sprintf(format, args...))
	}
	switch k.Type {
	case Long, Int:
		v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return bad("not a whole number")
		}
		if float64(v) < k.Min || float64(v) > k.Max {
			return bad("must be in [%d, %d]", longBound(k.Min), longBound(k.Max))
		}
	case Double:
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || math.IsNaN(v) {
			return bad("not a number")
		}
		if v < k.Min || v > k.Max {
			return bad("must be in [%g, %g]", k.Min, k.Max)
		}
	case Bool:
		if _, err := parseBool(value); err != nil {
			return bad("must be true or false")
		}
	case String:
		if !slices.Contains(k.Allowed, strings.TrimSpace(value)) {
			return bad("must be one of %s", strings.Join(k.Allowed, ", "))
		}
	case List:
		items := splitList(value)
		if len(items) == 0 {
			return bad("must list at least one of %s", strings.Join(k.Allowed, ", "))
		}
		for _, it := range items {
			if !slices.Contains(k.Allowed, it) {
				return bad("%s is not one of %s", errs.Quote(it), strings.Join(k.Allowed, ", "))
			}
		}
	}
	return nil
}

// parseBool is Kafka's: case-insensitive true/false only.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Validate checks a map of overrides: every key must be known and every value
// valid. Errors are errs.InvalidConfig; keys are checked in sorted order so
// the first error reported is stable.
func Validate(overrides map[string]string) error {
	names := make([]string, 0, len(overrides))
	for n := range overrides {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		k, ok := Lookup(n)
		if !ok {
			return errs.Errorf(errs.InvalidConfig, "unknown topic config %s", errs.Quote(n))
		}
		if err := k.Check(overrides[n]); err != nil {
			return err
		}
	}
	return CheckCombined(overrides)
}

// Normalize returns overrides with each value as the topic keeps it: without
// the spaces around it, which Check and Parse read past (Kafka trims them
// too), so that every reader of a stored value reads what was validated. A
// value of spaces alone is left as it is, for validation to refuse: it is
// not the empty value, which removes an override. A value of a known key
// is kept in its one written form, as Kafka describes the value it parsed:
// a number as its digits ("+5" and "05" are "5"), a boolean in lower case,
// a list (cleanup.policy) as its items, each once, without empty ones
// ("compact,,delete" and "compact, delete" are "compact,delete"). A value
// that does not parse is left as it came, for validation to refuse.
func Normalize(overrides map[string]string) map[string]string {
	if overrides == nil {
		return nil
	}
	out := make(map[string]string, len(overrides))
	for k, v := range overrides {
		if t := strings.TrimSpace(v); t != "" {
			v = t
		}
		if key, ok := Lookup(k); ok {
			v = key.canonical(v)
		}
		out[k] = v
	}
	return out
}

// canonical answers the one written form of a value of k (see Normalize),
// or value itself when it does not parse as k's type.
func (k Key) canonical(value string) string {
	switch k.Type {
	case Long, Int:
		if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			return strconv.FormatInt(n, 10)
		}
	case Double:
		if f, err := strconv.ParseFloat(value, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	case Bool:
		if b, err := parseBool(value); err == nil {
			return strconv.FormatBool(b)
		}
	case List:
		if items := splitList(value); len(items) > 0 {
			seen := map[string]bool{}
			items = slices.DeleteFunc(items, func(it string) bool {
				dup := seen[it]
				seen[it] = true
				return dup
			})
			return strings.Join(items, ",")
		}
	}
	return value
}

// CheckCombined checks the rules that join several keys of a topic's
// whole set of overrides (an alter's changes merged into what the topic
// had): min.compaction.lag.ms may not be above max.compaction.lag.ms.
func CheckCombined(overrides map[string]string) error {
	v := Effective(overrides)
	minLag, err1 := strconv.ParseInt(strings.TrimSpace(v["min.compaction.lag.ms"]), 10, 64)
	maxLag, err2 := strconv.ParseInt(strings.TrimSpace(v["max.compaction.lag.ms"]), 10, 64)
	if err1 == nil && err2 == nil && minLag > maxLag {
		return errs.Errorf(errs.InvalidConfig, "min.compaction.lag.ms %d is above max.compaction.lag.ms %d", minLag, maxLag)
	}
	return nil
}

// Effective returns every key's value: the override when there is one, the
// default otherwise, each in the form Normalize keeps (a topic set before
// values were kept so shows the same form as one set since). It does not
// validate.
func Effective(overrides map[string]string) map[string]string {
	out := make(map[string]string, len(table))
	for _, k := range table {
		out[k.Name] = k.Default
	}
	for n, v := range Normalize(overrides) {
		out[n] = v
	}
	return out
}

// Overridden answers the keys a topic sets itself, sorted: the keys of
// Effective whose value is not the default's doing (Kafka's
// DYNAMIC_TOPIC_CONFIG source), even where it equals the default.
func Overridden(overrides map[string]string) []string {
	return slices.Sorted(maps.Keys(overrides))
}
