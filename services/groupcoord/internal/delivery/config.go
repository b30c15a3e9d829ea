package delivery

import (
	"maps"
	"strconv"
	"strings"

	"skein/libs/dlqtopic"
	"skein/libs/errs"
)

// The group settings of dead-lettering, with Kafka-style names.
const (
	// KeyMaxAttempts: deliveries of a record before it is dead-lettered.
	KeyMaxAttempts = "max.delivery.attempts"
	// KeyTopic: the dead-letter topic of every topic the group reads;
	// empty means each source topic's own (dlqtopic.Default: "<topic>.dlq").
	KeyTopic = "dlq.topic"

	DefaultMaxAttempts = 5
	// MaxMaxAttempts bounds max.delivery.attempts.
	MaxMaxAttempts = 1000
)

// Config is a group's dead-letter settings.
type Config struct {
	MaxAttempts int32
	// Topic is the dead-letter topic; "" means TopicFor's default.
	Topic string
}

// DefaultConfig is the settings of a group that set none.
func DefaultConfig() Config { return Config{MaxAttempts: DefaultMaxAttempts} }

// TopicFor answers the dead-letter topic of a source topic.
func (c Config) TopicFor(source string) string {
	if c.Topic != "" {
		return c.Topic
	}
	return dlqtopic.Default(source)
}

// Values answers every setting with its effective value (dlq.topic ""
// when it is the per-topic default).
func (c Config) Values() map[string]string {
	return map[string]string{KeyMaxAttempts: strconv.Itoa(int(c.MaxAttempts)), KeyTopic: c.Topic}
}

// Parse answers the settings a group's stored map says, defaults for the
// keys it lacks; an unknown key or a bad value is INVALID_CONFIG.
func Parse(m map[string]string) (Config, error) {
	c := DefaultConfig()
	for k, v := range m {
		switch k {
		case KeyMaxAttempts:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 || n > MaxMaxAttempts {
				return Config{}, errs.Errorf(errs.InvalidConfig, "%s must be an integer from 1 to %d, got %s", k, MaxMaxAttempts, errs.Quote(v))
			}
			c.MaxAttempts = int32(n)
		case KeyTopic:
			if err := validTopic(v); err != nil {
				return Config{}, errs.Errorf(errs.InvalidConfig, "%s: %s", k, errs.Message(err))
			}
			c.Topic = v
		default:
			return Config{}, errs.Errorf(errs.InvalidConfig, "unknown group config %s: the group configs are %s and %s", errs.Quote(k), KeyMaxAttempts, KeyTopic)
		}
	}
	return c, nil
}

// Alter answers the stored map after setting the given keys: a key set to
// "" goes back to its default (and is removed from the map). Nothing
// changes unless every key and value is valid (INVALID_CONFIG).
func Alter(cur, set map[string]string) (map[string]string, Config, error) {
	if len(set) == 0 {
		return nil, Config{}, errs.Errorf(errs.InvalidConfig, "no config to set")
	}
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range set {
		if k != KeyMaxAttempts && k != KeyTopic {
			return nil, Config{}, errs.Errorf(errs.InvalidConfig, "unknown group config %s: the group configs are %s and %s", errs.Quote(k), KeyMaxAttempts, KeyTopic)
		}
		v = trimValue(v)
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	c, err := Parse(out)
	if err != nil {
		return nil, Config{}, err
	}
	if _, ok := out[KeyMaxAttempts]; ok {
		out[KeyMaxAttempts] = strconv.Itoa(int(c.MaxAttempts)) // "+3" and "03" are kept as 3
	}
	return out, c, nil
}

// Normalize answers set with each value as Alter keeps it (trimValue), so
// that whatever is checked of a value before Alter (who may write a
// dead-letter topic) is checked of the value kept.
func Normalize(set map[string]string) map[string]string {
	out := make(map[string]string, len(set))
	for k, v := range set {
		out[k] = trimValue(v)
	}
	return out
}

// trimValue drops the spaces around a value, as topic configs are kept;
// spaces alone are not the empty value (a reset), and are left for Parse
// to refuse.
func trimValue(v string) string {
	if t := strings.TrimSpace(v); t != "" {
		return t
	}
	return v
}

// validTopic applies Kafka's topic name rules: 1-249 characters of
// [a-zA-Z0-9._-], not "." or "..", and not a name reserved for Skein's
// internal topics (a "__" prefix), which hold the coordinators' state.
func validTopic(name string) error {
	switch {
	case name == "." || name == "..":
		return errs.Errorf(errs.InvalidConfig, "the topic name %s is not allowed", errs.Quote(name))
	case strings.HasPrefix(name, "__"):
		return errs.Errorf(errs.InvalidConfig, "the topic name %s starts with \"__\", which is reserved for internal topics", errs.Quote(name))
	case len(name) > 249:
		return errs.Errorf(errs.InvalidConfig, "the topic name is %d characters, the limit is 249", len(name))
	case name == "":
		return errs.Errorf(errs.InvalidConfig, "the topic name is empty")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return errs.Errorf(errs.InvalidConfig, "the topic name %q holds %q; allowed are [a-zA-Z0-9._-]", name, c)
		}
	}
	return nil
}
