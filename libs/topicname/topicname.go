// Package topicname holds Kafka's topic naming rule, which every place that
// takes a topic name (the controllers creating one, the gateway and the
// client library naming one) checks alike.
package topicname

import "skein/libs/errs"

// MaxLength is Kafka's limit on a topic name, in bytes.
const MaxLength = 249

// Validate checks Kafka's topic naming rules: 1–249 characters of
// [a-zA-Z0-9._-], neither "." nor "..". Its error is INVALID_TOPIC_EXCEPTION.
func Validate(name string) error {
	switch {
	case name == "":
		return errs.Errorf(errs.InvalidTopic, "the topic name is empty")
	case name == "." || name == "..":
		return errs.Errorf(errs.InvalidTopic, "the topic name cannot be %q", name)
	case len(name) > MaxLength:
		return errs.Errorf(errs.InvalidTopic, "the topic name is %d characters long, more than %d", len(name), MaxLength)
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return errs.Errorf(errs.InvalidTopic, "the topic name %q has %q at position %d; only [a-zA-Z0-9._-] are allowed", name, r, i)
		}
	}
	return nil
}
