// Package dlqtopic names a topic's default dead-letter topic: where a
// consumer group that sets no dlq.topic writes the records of that topic
// it gives up on after max.delivery.attempts; and the headers that say
// where a dead-lettered record came from, which the group coordinator
// writes and its tools read back (Parse).
package dlqtopic

import (
	"fmt"
	"hash/fnv"
)

const (
	// Suffix makes a source topic's default dead-letter topic.
	Suffix = ".dlq"
	// maxName is Kafka's limit on a topic name's length.
	maxName = 249
)

// Default answers "<source>.dlq". A source name too long for the suffix
// to fit within 249 characters keeps its first characters, then a hash of
// the whole name (two long names that begin alike get two dead-letter
// topics), then the suffix: 249 characters in all.
func Default(source string) string {
	if len(source)+len(Suffix) <= maxName {
		return source + Suffix
	}
	h := fnv.New32a()
	h.Write([]byte(source))
	tag := fmt.Sprintf("-%08x", h.Sum32())
	return source[:maxName-len(Suffix)-len(tag)] + tag + Suffix
}
