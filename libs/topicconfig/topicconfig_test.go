package topicconfig

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"skein/libs/errs"
)

func TestDefaultsValid(t *testing.T) {
	if !slices.IsSortedFunc(table, func(a, b Key) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("table must be sorted by name for Lookup")
	}
	for _, k := range table {
		if err := k.Check(k.Default); err != nil {
			t.Errorf("default of %s: %v", k.Name, err)
		}
	}
	c := Defaults()
	want := Config{
		CleanupDelete: true, CompressionType: "producer", DeleteRetentionMS: 86400000,
		FlushMessages: 1<<63 - 1, FlushMS: 1<<63 - 1, IndexIntervalBytes: 4096, MaxMessageBytes: 1048588,
		MinInsyncReplicas: 1, RetentionBytes: -1, RetentionMS: 604800000, SegmentBytes: 1 << 30, SegmentMS: 604800000,
		TimestampBeforeMaxMS: 1<<63 - 1, TimestampAfterMaxMS: 1<<63 - 1,
		MaxCompactionLagMS: 1<<63 - 1, MinCleanableDirtyRatio: 0.5,
	}
	if c != want {
		t.Fatalf("defaults\n got %+v\nwant %+v", c, want)
	}
}

func TestRequiredKeysKnown(t *testing.T) {
	for _, n := range []string{"cleanup.policy", "compression.type", "delete.retention.ms", "flush.messages", "flush.ms",
		"index.interval.bytes", "max.message.bytes", "message.timestamp.type", "min.insync.replicas", "retention.bytes",
		"retention.ms", "segment.bytes", "segment.ms", "unclean.leader.election.enable"} {
		if _, ok := Lookup(n); !ok {
			t.Errorf("%s is not in the table", n)
		}
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		in      map[string]string
		check   func(Config) bool
		wantErr string // substring of the message; "" = success
	}{
		{"compact", map[string]string{"cleanup.policy": "compact"}, func(c Config) bool { return c.CleanupCompact && !c.CleanupDelete }, ""},
		{"both policies", map[string]string{"cleanup.policy": "compact, delete"}, func(c Config) bool { return c.CleanupCompact && c.CleanupDelete }, ""},
		{"segment.bytes", map[string]string{"segment.bytes": "1048576"}, func(c Config) bool { return c.SegmentBytes == 1<<20 }, ""},
		{"retention.ms forever", map[string]string{"retention.ms": "-1"}, func(c Config) bool { return c.RetentionMS == -1 }, ""},
		{"min.insync.replicas accepted", map[string]string{"min.insync.replicas": "2"}, func(c Config) bool { return c.MinInsyncReplicas == 2 }, ""},
		{"bool any case", map[string]string{"unclean.leader.election.enable": "TRUE"}, func(c Config) bool { return c.UncleanLeaderElection }, ""},
		{"log append time", map[string]string{"message.timestamp.type": "LogAppendTime"}, func(c Config) bool { return c.LogAppendTime }, ""},
		{"create-time bounds", map[string]string{"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "0"}, func(c Config) bool {
			return c.TimestampBeforeMaxMS == 3600000 && c.TimestampAfterMaxMS == 0
		}, ""},
		{"compaction timing", map[string]string{"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "5000", "min.cleanable.dirty.ratio": "0.1"}, func(c Config) bool {
			return c.MinCompactionLagMS == 1000 && c.MaxCompactionLagMS == 5000 && c.MinCleanableDirtyRatio == 0.1
		}, ""},
		{"min compaction lag above max", map[string]string{"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"}, nil, "above max.compaction.lag.ms"},
		{"negative create-time bound", map[string]string{"message.timestamp.after.max.ms": "-1"}, nil, "message.timestamp.after.max.ms"},
		{"flush every message", map[string]string{"flush.messages": "1"}, func(c Config) bool { return c.FlushMessages == 1 }, ""},
		{"compression", map[string]string{"compression.type": "zstd"}, func(c Config) bool { return c.CompressionType == "zstd" }, ""},
		{"unused but known", map[string]string{"segment.jitter.ms": "10", "preallocate": "true"}, func(Config) bool { return true }, ""},

		{"unknown key", map[string]string{"retention.hours": "1"}, nil, `unknown topic config "retention.hours"`},
		{"not a number", map[string]string{"retention.ms": "soon"}, nil, "retention.ms: not a whole number"},
		{"below min", map[string]string{"retention.ms": "-2"}, nil, "retention.ms: must be in [-1,"},
		{"segment too small", map[string]string{"segment.bytes": "13"}, nil, "segment.bytes: must be in [14,"},
		{"int overflow", map[string]string{"segment.bytes": "4294967296"}, nil, "segment.bytes: must be in"},
		{"flush.messages zero", map[string]string{"flush.messages": "0"}, nil, "flush.messages"},
		{"bad policy", map[string]string{"cleanup.policy": "compact,archive"}, nil, `"archive" is not one of`},
		{"empty policy", map[string]string{"cleanup.policy": " , "}, nil, "at least one"},
		{"bad bool", map[string]string{"unclean.leader.election.enable": "yes"}, nil, "true or false"},
		{"bad codec", map[string]string{"compression.type": "brotli"}, nil, "must be one of"},
		{"ratio above 1", map[string]string{"min.cleanable.dirty.ratio": "1.5"}, nil, "must be in [0, 1]"},
		{"ratio NaN", map[string]string{"min.cleanable.dirty.ratio": "NaN"}, nil, "not a number"},
		{"timestamp type", map[string]string{"message.timestamp.type": "createtime"}, nil, "CreateTime, LogAppendTime"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !c.check(got) {
					t.Fatalf("parsed %+v", got)
				}
				return
			}
			if !errors.Is(err, errs.InvalidConfig) {
				t.Fatalf("got %v, want INVALID_CONFIG", err)
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("message %q does not contain %q", err, c.wantErr)
			}
		})
	}
}

func TestValidateReportsFirstKeyInOrder(t *testing.T) {
	err := Validate(map[string]string{"zzz": "1", "aaa": "1"})
	if err == nil || !strings.Contains(err.Error(), `"aaa"`) {
		t.Fatalf("%v", err)
	}
}

func TestEffective(t *testing.T) {
	e := Effective(map[string]string{"retention.ms": "5"})
	if e["retention.ms"] != "5" || e["segment.bytes"] != "1073741824" || len(e) != len(table) {
		t.Fatalf("%v", e)
	}
}

// A value out of range is refused with the range it must be in.
func TestOutOfRangeNamesTheRange(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"retention.ms", "-5", "must be in [-1, 9223372036854775807]"},
		{"segment.bytes", "3", "must be in [14, 2147483647]"},
		{"min.cleanable.dirty.ratio", "2", "must be in [0, 1]"},
	} {
		err := Validate(map[string]string{tc.key: tc.value})
		if errs.Of(err) != errs.InvalidConfig || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want %q", tc.key, tc.value, err, tc.want)
		}
	}
}

func TestNormalizeTrimsValues(t *testing.T) {
	got := Normalize(map[string]string{"min.insync.replicas": " 2 ", "cleanup.policy": "compact, delete\t", "retention.ms": "", "segment.ms": "  "})
	want := map[string]string{"min.insync.replicas": "2", "cleanup.policy": "compact,delete", "retention.ms": "", "segment.ms": "  "}
	if !maps.Equal(got, want) {
		t.Errorf("Normalize = %q, want %q", got, want)
	}
	// A list is kept as its items, each once, without empty ones; one with
	// no item is left for validation to refuse.
	for in, want := range map[string]string{"compact,,delete": "compact,delete", "delete,delete": "delete", "compact,": "compact",
		" delete , compact ": "delete,compact", ",": ",", "compact,bogus": "compact,bogus"} {
		if got := Normalize(map[string]string{"cleanup.policy": in})["cleanup.policy"]; got != want {
			t.Errorf("Normalize(cleanup.policy %q) = %q, want %q", in, got, want)
		}
	}
	// A value is kept in the form Kafka would describe it in; one that does
	// not parse is left as it came, for validation to refuse with it.
	for _, c := range []struct{ key, in, want string }{
		{"retention.ms", "+5", "5"},
		{"min.insync.replicas", "07", "7"},
		{"retention.bytes", "-01", "-1"},
		{"unclean.leader.election.enable", "TRUE", "true"},
		{"unclean.leader.election.enable", " False ", "false"},
		{"min.cleanable.dirty.ratio", "0.50", "0.5"},
		{"min.cleanable.dirty.ratio", "5e-1", "0.5"},
		{"retention.ms", "1e3", "1e3"},
		{"retention.ms", "ten", "ten"},
		{"unclean.leader.election.enable", "yes", "yes"},
		{"compression.type", " zstd ", "zstd"},
		{"no.such.key", " +5 ", "+5"},
	} {
		if got := Normalize(map[string]string{c.key: c.in})[c.key]; got != c.want {
			t.Errorf("Normalize(%s %q) = %q, want %q", c.key, c.in, got, c.want)
		}
	}
	if Normalize(nil) != nil {
		t.Error("Normalize(nil) is not nil")
	}
}

// A refused value's message repeats at most the start of a long value.
func TestCheckQuotesALongValueShort(t *testing.T) {
	k, _ := Lookup("retention.ms")
	if msg := errs.Message(k.Check(strings.Repeat("x", 100_000))); len(msg) > 300 || !strings.Contains(msg, "(100000 bytes)") {
		t.Errorf("message of %d bytes: %.300q", len(msg), msg)
	}
}

// The keys a topic sets itself are listed sorted, a default's value set
// explicitly included; none for a topic that sets none.
func TestOverridden(t *testing.T) {
	got := Overridden(map[string]string{"retention.ms": "5", "cleanup.policy": "delete", "min.insync.replicas": "2"})
	if want := []string{"cleanup.policy", "min.insync.replicas", "retention.ms"}; !slices.Equal(got, want) {
		t.Errorf("Overridden = %v, want %v", got, want)
	}
	if got := Overridden(nil); len(got) != 0 {
		t.Errorf("Overridden(nil) = %v", got)
	}
}

// A topic kept with a value in another form (set before values were kept
// in one) is shown in the one form.
func TestEffectiveShowsTheKeptForm(t *testing.T) {
	got := Effective(map[string]string{"retention.ms": "+5", "unclean.leader.election.enable": "TRUE"})
	if got["retention.ms"] != "5" || got["unclean.leader.election.enable"] != "true" || got["segment.ms"] != "604800000" {
		t.Errorf("Effective = retention.ms %q, unclean %q, segment.ms %q", got["retention.ms"], got["unclean.leader.election.enable"], got["segment.ms"])
	}
}
