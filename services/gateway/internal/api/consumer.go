package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/grpcopt"
	"skein/libs/rpcerr"
)

// Fetch defaults, as documented in docs/API.md.
const (
	DefaultMaxRecords = 500
	DefaultMaxBytes   = 1 << 20
)

// Consumer is ConsumerService.
type Consumer struct {
	skeinv1.UnimplementedConsumerServiceServer

	c        *client.Client
	log      *slog.Logger
	drain    sync.Once
	draining chan struct{} // closed by Drain
}

// NewConsumer serves ConsumerService through c.
func NewConsumer(c *client.Client, log *slog.Logger) *Consumer {
	return &Consumer{c: c, log: log, draining: make(chan struct{})}
}

// Drain ends every Tail stream (cleanly, as if the caller had stopped), so a
// graceful stop does not wait for followers that never leave.
func (s *Consumer) Drain() { s.drain.Do(func() { close(s.draining) }) }

// startOffset resolves an absent offset to the log start (Fetch) or the
// high watermark / last stable offset (Tail).
func (s *Consumer) startOffset(ctx context.Context, topic string, partition int32, offset *int64, spec int64, iso skeinv1.IsolationLevel) (int64, error) {
	if offset != nil {
		if *offset < 0 {
			return 0, errs.Errorf(errs.OffsetOutOfRange, "offset %d is negative", *offset)
		}
		return *offset, nil
	}
	offs, err := s.c.ListOffsets(ctx, topic, []int32{partition}, spec, iso)
	if err != nil {
		return 0, err
	}
	if offs[0].Err != nil {
		return 0, offs[0].Err
	}
	return offs[0].Offset, nil
}

// Fetch reads one partition from an offset, long-polling up to max_wait_ms
// while there is less than min_bytes to answer.
func (s *Consumer) Fetch(ctx context.Context, req *skeinv1.FetchRequest) (*skeinv1.FetchResponse, error) {
	creq, err := s.fetchRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithTimeout(ctx, creq.MaxWait+client.DefaultRequestTimeout)
	defer cancel()
	res, err := s.c.Fetch(fctx, creq)
	if err != nil {
		return nil, err
	}
	return toFetchResponse(res, req.GetEncoding()), nil
}

// FetchEncoded is Fetch answering the FetchResponse in its wire form
// (grpcopt.Encoded), written straight from the records while they are
// still slices of the storage node's answer: no copy of them, and no
// message per record, before the one write into the answer's buffer.
func (s *Consumer) FetchEncoded(ctx context.Context, req *skeinv1.FetchRequest) (any, error) {
	creq, err := s.fetchRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithTimeout(ctx, creq.MaxWait+client.DefaultRequestTimeout)
	defer cancel()
	res, release, err := s.c.FetchView(fctx, creq)
	if err != nil {
		return nil, err
	}
	defer release()
	enc := req.GetEncoding()
	if !wireFetchable(res) {
		// The message path, whose bytes must outlive release.
		return proto.Clone(toFetchResponse(res, enc)), nil
	}
	return grpcopt.NewEncoded(fetchResponseSize(res, enc), func(dst []byte) []byte {
		return appendFetchResponse(dst, res, enc)
	}), nil
}

// fetchRequest checks a Fetch request and answers what to ask the
// partition's leader.
func (s *Consumer) fetchRequest(ctx context.Context, req *skeinv1.FetchRequest) (client.FetchRequest, error) {
	if err := validateRead(req.GetIsolationLevel(), req.GetEncoding()); err != nil {
		return client.FetchRequest{}, err
	}
	_, n, err := knownTopic(ctx, s.c, req.GetTopic())
	if err != nil {
		return client.FetchRequest{}, err
	}
	if err := checkPartition(req.GetTopic(), req.GetPartition(), n); err != nil {
		return client.FetchRequest{}, err
	}
	maxRecords, maxBytes, maxWait := int32(DefaultMaxRecords), int32(DefaultMaxBytes), int32(0)
	if req.MaxRecords != nil {
		if maxRecords = *req.MaxRecords; maxRecords < 1 {
			return client.FetchRequest{}, errs.Errorf(errs.InvalidRequest, "max_records must be at least 1, got %d", maxRecords)
		}
	}
	if req.MaxBytes != nil {
		if maxBytes = *req.MaxBytes; maxBytes < 1 {
			return client.FetchRequest{}, errs.Errorf(errs.InvalidFetchSize, "max_bytes must be at least 1, got %d", maxBytes)
		}
	}
	if req.MaxWaitMs != nil {
		if maxWait = *req.MaxWaitMs; maxWait < 0 {
			return client.FetchRequest{}, errs.Errorf(errs.InvalidRequest, "max_wait_ms must not be negative, got %d", maxWait)
		}
	}
	if req.GetMinBytes() < 0 {
		return client.FetchRequest{}, errs.Errorf(errs.InvalidRequest, "min_bytes must not be negative, got %d", req.GetMinBytes())
	}
	offset, err := s.startOffset(ctx, req.GetTopic(), req.GetPartition(), req.Offset, client.EarliestOffset, req.GetIsolationLevel())
	if err != nil {
		return client.FetchRequest{}, err
	}
	wait := time.Duration(maxWait) * time.Millisecond
	return client.FetchRequest{
		Topic: req.GetTopic(), Partition: req.GetPartition(), Offset: offset,
		MaxRecords: int(maxRecords), MaxBytes: maxBytes, MaxWait: wait,
		MinBytes: req.GetMinBytes(), Isolation: req.GetIsolationLevel(),
		// An offline partition is answered LEADER_NOT_AVAILABLE once the
		// caller's own wait (or a moment for the metadata) has passed.
		LeaderWait: max(wait, offlineGrace),
		// An answer that is empty only because its batches hold no record
		// for the reader is not the end of the partition.
		PastEmpty: true,
	}, nil
}

// offlineGrace is how long a fetch that may not wait (max_wait_ms 0) waits
// for a partition without a leader to get one: a moment for the metadata,
// not the request timeout.
const offlineGrace = 2 * time.Second

func toFetchResponse(res *client.FetchResult, enc skeinv1.Encoding) *skeinv1.FetchResponse {
	out := &skeinv1.FetchResponse{
		NextOffset: res.NextOffset, HighWatermark: res.HighWatermark,
		LastStableOffset: res.LastStableOffset, LogStartOffset: res.LogStartOffset,
		Records: make([]*skeinv1.ConsumedRecord, 0, len(res.Records)),
	}
	for _, r := range res.Records {
		out.Records = append(out.Records, toConsumed(r, enc))
	}
	return out
}

// RegisterConsumerService registers c on s, its Fetch answering through
// FetchEncoded.
func RegisterConsumerService(s grpc.ServiceRegistrar, c *Consumer) {
	s.RegisterService(grpcopt.ReplaceUnary(&skeinv1.ConsumerService_ServiceDesc, "Fetch",
		func(_ any, ctx context.Context, req *skeinv1.FetchRequest) (any, error) {
			return c.FetchEncoded(ctx, req)
		}), c)
}

// Tail streams records from an offset (default: the end) as they are
// committed, until the caller goes away.
func (s *Consumer) Tail(req *skeinv1.TailRequest, stream skeinv1.ConsumerService_TailServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-s.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := validateRead(req.GetIsolationLevel(), req.GetEncoding()); err != nil {
		return err
	}
	_, n, err := knownTopic(ctx, s.c, req.GetTopic())
	if err != nil {
		return err
	}
	if err := checkPartition(req.GetTopic(), req.GetPartition(), n); err != nil {
		return err
	}
	offset, err := s.startOffset(ctx, req.GetTopic(), req.GetPartition(), req.Offset, client.LatestOffset, req.GetIsolationLevel())
	if err != nil {
		return err
	}
	// One stream from the leader feeds this one: no request per answer.
	// The records are slices of the answer's pooled buffer while the
	// callback runs: Send marshals them before it returns.
	err = s.c.Follow(ctx, client.FetchRequest{
		Topic: req.GetTopic(), Partition: req.GetPartition(), Offset: offset,
		MaxRecords: DefaultMaxRecords, MaxBytes: DefaultMaxBytes, Isolation: req.GetIsolationLevel(),
	}, func(res *client.FetchResult) error {
		if len(res.Records) == 0 {
			return nil // control batches, or an aborted transaction's
		}
		out := &skeinv1.TailResponse{NextOffset: res.NextOffset, HighWatermark: res.HighWatermark}
		for _, r := range res.Records {
			out.Records = append(out.Records, toConsumed(r, req.GetEncoding()))
		}
		return stream.Send(out)
	})
	if ctx.Err() != nil {
		// The caller left, or the gateway drains: the status says which.
		return drained(s.draining, "tail again from the next offset on a new stream")
	}
	return err
}

// drained is the status of a stream ended by its context: nil when the
// caller left, BROKER_NOT_AVAILABLE (gRPC UNAVAILABLE) when the gateway
// is shutting down, so that the client tells a stop from the end it asked
// for and goes to another gateway; next says what to do.
func drained(draining <-chan struct{}, next string) error {
	select {
	case <-draining:
		return rpcerr.ToGRPC(errs.Errorf(errs.BrokerNotAvailable, "the gateway is shutting down: %s", next))
	default:
		return nil
	}
}
