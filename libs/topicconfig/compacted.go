package topicconfig

import "slices"

// CompactedFrom reports whether a topic's overrides, as metadata carries
// them, make it compacted (cleanup.policy holds compact), without parsing
// the rest: its leader refuses a batch with a record without a key.
func CompactedFrom(overrides map[string]string) bool {
	return slices.Contains(splitList(overrides["cleanup.policy"]), "compact")
}
