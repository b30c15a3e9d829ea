package client

import (
	"testing"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/metadata"
	"skein/libs/record"
)

// Values stored with spaces around them (before the controllers kept values
// trimmed) are read past them, as their validation read them.
func TestTopicConfigsReadPastSpaces(t *testing.T) {
	m := metadata.New("c")
	if err := m.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{{Record: &controllerv1.MetadataRecord_Topic{
		Topic: &controllerv1.TopicRecord{Name: "t", TopicId: "id-t", Configs: map[string]string{"max.message.bytes": " 300 ", "compression.type": "zstd "}}}}}}); err != nil {
		t.Fatal(err)
	}
	if n := maxMessageBytes(m, "t"); n != 300 {
		t.Errorf("max.message.bytes %d, want 300", n)
	}
	if c := codecFor(m, "t", record.None); c != record.Zstd {
		t.Errorf("codec %v, want zstd", c)
	}
}
