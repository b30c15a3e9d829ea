// Package topicconfig owns the table of Kafka topic-level configuration keys
// Skein accepts: their names, types, defaults and valid ranges, and the
// parsing of a map of overrides into a typed Config.
//
// Contract: pure (no I/O, no clock). Validate and Parse refuse an unknown key
// or a bad value with errs.InvalidConfig and a message that names the key;
// the controller runs them for CreateTopics and AlterConfigs, the storage
// node turns the resulting Config into a log.Config. Keys that Skein accepts
// for Kafka compatibility but does not act on are marked in the table.
package topicconfig
