package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/dlqtopic"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// deadLetter is one record of a dead-letter topic that a group gave up on.
type deadLetter struct {
	DLQTopic     string `json:"dlq_topic"`
	DLQPartition int32  `json:"dlq_partition"`
	DLQOffset    int64  `json:"dlq_offset"`
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	Offset       int64  `json:"offset"`
	Attempts     int32  `json:"attempts"`
	Reason       string `json:"reason"`
	// Key and Value are base64, under the API's names for bytes.
	Key   []byte `json:"key_bytes,omitempty"`
	Value []byte `json:"value_bytes,omitempty"`
	// TimestampMs is the record's own timestamp; DeadLetteredMs the
	// copy's, the time it was dead-lettered, for a copy that carries the
	// record's own in dlq.source.timestamp (a copy written before that
	// header existed carries the record's own time, and has none).
	TimestampMs    int64  `json:"timestamp_ms"`
	DeadLetteredMs *int64 `json:"dead_lettered_ms,omitempty"`
	// Headers are the record's own (the dead-letter headers left out).
	Headers []*skeinv1.Header `json:"headers,omitempty"`
	null    bool              // a tombstone: no value
}

// dlqTopicOf answers the dead-letter topic of a group's topic: named (the
// one --dlq-topic names) when it is not empty, else the group's dlq.topic,
// else the topic's own (TOPIC.dlq, shortened for a long name). A named one
// is taken as it is, without asking the group's config: records
// dead-lettered before the group's dlq.topic changed, or before its config
// was deleted, are in a topic the config no longer names.
func dlqTopicOf(ctx context.Context, groups skeinv1.GroupServiceClient, group, topic, named string) (string, error) {
	if named != "" {
		return named, nil
	}
	cfg, err := groups.GetGroupConfig(ctx, &skeinv1.GetGroupConfigRequest{Group: group})
	if err != nil {
		return "", err
	}
	if t := cfg.GetConfigs()["dlq.topic"]; t != "" {
		return t, nil
	}
	return dlqtopic.Default(topic), nil
}

// readDeadLetters reads every partition of the dead-letter topic up to its
// high watermark and answers the records the group dead-lettered from topic.
// With neither the dead-letter topic nor topic in the cluster it answers
// topic's UNKNOWN_TOPIC_OR_PARTITION: a misspelt name is not "no dead
// letters". A dead-letter topic named on the command line (named) that
// does not exist answers its own UNKNOWN_TOPIC_OR_PARTITION: it was meant
// to hold dead letters already. A dead-letter topic outlives its source, so
// its records are listed after the source is deleted.
func readDeadLetters(ctx context.Context, admin skeinv1.AdminServiceClient, consumer skeinv1.ConsumerServiceClient, dlqTopic, group, topic string, named bool) ([]deadLetter, error) {
	desc, err := admin.DescribeTopic(ctx, &skeinv1.DescribeTopicRequest{Topic: dlqTopic})
	if errs.Of(rpcerr.FromStatus(err)) == errs.UnknownTopicOrPartition && !named {
		// Created with the first dead letter: none yet, if topic exists.
		if _, err := admin.DescribeTopic(ctx, &skeinv1.DescribeTopicRequest{Topic: topic}); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []deadLetter
	for _, p := range desc.GetTopic().GetPartitions() {
		end := p.GetHighWatermark()
		for off := p.GetLogStartOffset(); off < end; {
			resp, err := consumer.Fetch(ctx, &skeinv1.FetchRequest{Topic: dlqTopic, Partition: p.GetPartition(), Offset: &off,
				Encoding: skeinv1.Encoding_BYTES})
			if err != nil {
				return nil, err
			}
			end = max(end, resp.GetHighWatermark())
			for _, r := range resp.GetRecords() {
				if d, src, ok := parseDeadLetter(dlqTopic, r); ok && d.Topic == topic && src.Group == group {
					out = append(out, d)
				}
			}
			if resp.GetNextOffset() <= off {
				break
			}
			off = resp.GetNextOffset()
		}
	}
	return out, nil
}

// parseDeadLetter reads a dead-letter record's dlq.* headers
// (dlqtopic.Parse); ok is false for a record without them, or whose last
// one of a kind does not parse. Its own headers (Headers) are the rest: an
// earlier dead-lettering's dlq.* headers stay with the record.
func parseDeadLetter(dlqTopic string, r *skeinv1.ConsumedRecord) (deadLetter, dlqtopic.Source, bool) {
	hs := r.GetHeaders()
	src, own, ok := dlqtopic.Parse(len(hs), func(i int) (string, []byte) { return hs[i].GetKey(), hs[i].GetValueBytes() })
	if !ok {
		return deadLetter{}, src, false
	}
	d := deadLetter{DLQTopic: dlqTopic, DLQPartition: r.GetPartition(), DLQOffset: r.GetOffset(), Key: r.GetKeyBytes(),
		Value: r.GetValueBytes(), TimestampMs: r.GetTimestampMs(), null: r.ValueBytes == nil,
		Topic: src.Topic, Partition: src.Partition, Offset: src.Offset, Reason: src.Reason, Attempts: src.Attempts}
	for _, i := range own {
		d.Headers = append(d.Headers, hs[i])
	}
	if src.HasTimestamp {
		copyTS := d.TimestampMs
		d.TimestampMs, d.DeadLetteredMs = src.Timestamp, &copyTS
	}
	return d, src, true
}

// printable shows bytes as text when they are, else as their length.
// Control characters are escaped (\n, \t, \x1b...): a key or a reason is
// any member's text, and must neither break the table's columns nor send
// escape sequences to the terminal.
func printable(b []byte) string {
	if b == nil {
		return "-"
	}
	if !utf8.Valid(b) {
		return fmt.Sprintf("<%d bytes>", len(b))
	}
	var sb strings.Builder
	for _, r := range string(b) {
		switch {
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\r':
			sb.WriteString(`\r`)
		case unicode.IsControl(r) && r < 0x80:
			fmt.Fprintf(&sb, `\x%02x`, r)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// groupDLQ lists the records a group dead-lettered from a topic, with the
// reasons (skein group dlq G --topic T), from the dead-letter topic named
// (--dlq-topic) or else the group's.
func groupDLQ(ctx context.Context, f *flags, stdio IO, group, topic, named string) error {
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	dlqTopic, err := dlqTopicOf(ctx, skeinv1.NewGroupServiceClient(conn), group, topic, named)
	if err != nil {
		return err
	}
	list, err := readDeadLetters(ctx, skeinv1.NewAdminServiceClient(conn), skeinv1.NewConsumerServiceClient(conn), dlqTopic, group, topic, named != "")
	if err != nil {
		return err
	}
	if *f.json {
		if list == nil {
			list = []deadLetter{}
		}
		return writeJSON(stdio.Out, list)
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "DLQ\tSOURCE\tATTEMPTS\tKEY\tREASON\n")
	for _, d := range list {
		fmt.Fprintf(tw, "%s:%d@%d\t%s:%d@%d\t%d\t%s\t%s\n", d.DLQTopic, d.DLQPartition, d.DLQOffset, d.Topic, d.Partition, d.Offset,
			d.Attempts, printable(d.Key), printable([]byte(d.Reason)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Err, "%d record(s) of group %s from %s in %s\n", len(list), group, topic, dlqTopic)
	return nil
}

// groupDLQReplay produces what a group dead-lettered from a topic back to
// the topic, each to its source partition with its key, value, own headers
// and timestamp (skein group dlq-replay G --topic T), from the dead-letter
// topic named (--dlq-topic) or else the group's.
func groupDLQReplay(ctx context.Context, f *flags, stdio IO, group, topic, named string) error {
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	dlqTopic, err := dlqTopicOf(ctx, skeinv1.NewGroupServiceClient(conn), group, topic, named)
	if err != nil {
		return err
	}
	list, err := readDeadLetters(ctx, skeinv1.NewAdminServiceClient(conn), skeinv1.NewConsumerServiceClient(conn), dlqTopic, group, topic, named != "")
	if err != nil {
		return err
	}
	producer := skeinv1.NewProducerServiceClient(conn)
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	if !*f.json {
		fmt.Fprintf(tw, "DLQ\tREPLAYED TO\n")
	}
	type replayed struct {
		DLQTopic     string `json:"dlq_topic"`
		DLQPartition int32  `json:"dlq_partition"`
		DLQOffset    int64  `json:"dlq_offset"`
		Topic        string `json:"topic"`
		Partition    int32  `json:"partition"`
		Offset       int64  `json:"offset"`
	}
	done := []replayed{}
	for _, d := range list {
		rec := &skeinv1.ProduceRecord{KeyBytes: d.Key, Headers: d.Headers, Partition: &d.Partition, TimestampMs: &d.TimestampMs}
		if !d.null {
			rec.ValueBytes = d.Value
			if rec.ValueBytes == nil {
				rec.ValueBytes = []byte{}
			}
		}
		resp, err := producer.Produce(ctx, &skeinv1.ProduceRequest{Topic: topic, Records: []*skeinv1.ProduceRecord{rec}})
		if err != nil {
			return fmt.Errorf("replaying %s:%d@%d (%d replayed before it): %w", d.DLQTopic, d.DLQPartition, d.DLQOffset, len(done), err)
		}
		r := resp.GetResults()[0]
		if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
			return fmt.Errorf("replaying %s:%d@%d (%d replayed before it): %s: %s", d.DLQTopic, d.DLQPartition, d.DLQOffset, len(done), r.GetErrorCode(), r.GetMessage())
		}
		done = append(done, replayed{d.DLQTopic, d.DLQPartition, d.DLQOffset, topic, r.GetPartition(), r.GetOffset()})
		if !*f.json {
			fmt.Fprintf(tw, "%s:%d@%d\t%s:%d@%d\n", d.DLQTopic, d.DLQPartition, d.DLQOffset, topic, r.GetPartition(), r.GetOffset())
		}
	}
	if *f.json {
		return writeJSON(stdio.Out, done)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Err, "replayed %d record(s) of group %s from %s to %s\n", len(done), group, dlqTopic, topic)
	return nil
}

// writeJSON prints v as indented JSON (bytes base64-encoded).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
