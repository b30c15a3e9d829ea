package replica

import (
	"testing"

	"skein/services/storage/internal/partition"
)

// A value stored with spaces around it (before the controllers kept values
// trimmed) is read past them, as its validation read it: min.insync.replicas
// " 2 " is enforced as 2, not dropped for the default.
func TestConfigsForReadsValuesPastSpaces(t *testing.T) {
	_, pcfg, err := parseTopicConfigs(Config{}, map[string]string{"min.insync.replicas": " 2 ", "max.message.bytes": "300 "}).forPartition(partition.TP{Topic: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pcfg.MinInsyncReplicas != 2 || pcfg.MaxMessageBytes != 300 {
		t.Errorf("min.insync.replicas %d, max.message.bytes %d; want 2 and 300", pcfg.MinInsyncReplicas, pcfg.MaxMessageBytes)
	}
}
