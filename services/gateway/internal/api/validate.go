package api

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/rpcerr"
	"skein/libs/topicname"
)

// ValidateTopicName checks Kafka's topic naming rules (topicname.Validate).
func ValidateTopicName(name string) error { return topicname.Validate(name) }

// IsInternalTopic reports whether name is reserved for Skein's own topics.
func IsInternalTopic(name string) bool { return strings.HasPrefix(name, "__") }

// validateAcks answers the acks to use: -1 by default, else 0, 1 or -1.
func validateAcks(acks *int32) (int, error) {
	if acks == nil {
		return client.AcksAll, nil
	}
	switch *acks {
	case 0, 1, -1:
		return int(*acks), nil
	}
	return 0, errs.Errorf(errs.InvalidRequiredAcks, "acks must be 0, 1 or -1, got %d", *acks)
}

// knownTopic waits for the first metadata and answers the topic's partition
// count, or UNKNOWN_TOPIC_OR_PARTITION.
func knownTopic(ctx context.Context, c *client.Client, topic string) (*metadata.Image, int32, error) {
	if err := ValidateTopicName(topic); err != nil {
		return nil, 0, err
	}
	if err := waitReady(ctx, c); err != nil {
		return nil, 0, err
	}
	m := c.Metadata()
	n := m.PartitionCount(topic)
	if n == 0 {
		return nil, 0, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", topic)
	}
	return m, n, nil
}

// readyWait bounds how long a call waits for the gateway's first metadata
// before it is refused: a gateway that cannot reach any controller answers
// 503 instead of hanging.
const readyWait = 5 * time.Second

func waitReady(ctx context.Context, c *client.Client) error {
	select {
	case <-c.Ready():
		return nil // every call after the first metadata: no timer to set up
	default:
	}
	wctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		return errs.Errorf(errs.LeaderNotAvailable, "the gateway has no cluster metadata from the controllers yet")
	}
	return nil
}

// checkPartition refuses a partition outside [0, n).
func checkPartition(topic string, partition, n int32) error {
	if partition < 0 || partition >= n {
		return errs.Errorf(errs.UnknownTopicOrPartition, "topic %q has %d partitions, no partition %d", topic, n, partition)
	}
	return nil
}

// ErrorInterceptors turn the domain errors handlers return into gRPC statuses
// carrying the Kafka error name: the one gRPC edge of the gateway.
func ErrorInterceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		return resp, rpcerr.ToGRPC(err)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return rpcerr.ToGRPC(h(srv, ss))
	}
	return unary, stream
}

// validateRead refuses an isolation level or an encoding the API does not
// define: a JSON body or a gRPC client may send any number for an enum.
func validateRead(iso skeinv1.IsolationLevel, enc skeinv1.Encoding) error {
	if _, ok := skeinv1.IsolationLevel_name[int32(iso)]; !ok {
		return errs.Errorf(errs.InvalidRequest, "isolation_level %d: want READ_UNCOMMITTED or READ_COMMITTED", iso)
	}
	if _, ok := skeinv1.Encoding_name[int32(enc)]; !ok {
		return errs.Errorf(errs.InvalidRequest, "encoding %d: want TEXT or BYTES", enc)
	}
	return nil
}
