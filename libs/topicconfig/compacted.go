package topicconfig

import (
	"slices"
	"strings"
)

// CompactedFrom reports whether a topic's overrides, as metadata carries
// them, make it compacted (cleanup.policy holds compact), without parsing
// the rest: its leader refuses a batch with a record without a key. A
// producer asks it for every record: a topic that is not compacted costs
// no allocation.
func CompactedFrom(overrides map[string]string) bool {
	v := overrides["cleanup.policy"]
	return strings.Contains(v, "compact") && slices.Contains(splitList(v), "compact")
}
