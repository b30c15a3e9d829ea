package server

import (
	"context"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/services/storage/internal/partition"
)

// heldReplicas holds every produce at the partition lookup until release
// closes, as a produce waiting in purgatory holds its request.
type heldReplicas struct{ release chan struct{} }

func (h heldReplicas) Get(tp partition.TP) (*partition.Partition, error) {
	<-h.release
	return nil, errs.Errorf(errs.UnknownTopicOrPartition, "no %v here", tp)
}

func produceOf(sizes ...int) *storagev1.ProduceRequest {
	req := &storagev1.ProduceRequest{Acks: -1}
	for i, n := range sizes {
		req.Partitions = append(req.Partitions, &storagev1.PartitionProduce{Topic: "t", Partition: int32(i), Records: make([]byte, n)})
	}
	return req
}

func TestInflightProduceBytesAreBounded(t *testing.T) {
	held := heldReplicas{release: make(chan struct{})}
	s := New(held, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()))
	s.LimitInflightProduce(64 << 10)
	ctx := context.Background()

	first := make(chan *storagev1.ProduceResponse, 1)
	go func() {
		resp, _ := s.Produce(ctx, produceOf(20<<10, 20<<10))
		first <- resp
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.InflightProduceBytes() != 40<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("the held produce charges %d bytes, want %d", s.InflightProduceBytes(), 40<<10)
		}
		time.Sleep(time.Millisecond)
	}
	// What does not fit the rest is answered at once, per partition, and
	// nothing of it reaches a replica.
	resp, err := s.Produce(ctx, produceOf(15<<10, 15<<10))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetPartitions() {
		if p.GetErrorCode() != skeinv1.ErrorCode_THROTTLING_QUOTA_EXCEEDED || p.GetBaseOffset() != -1 {
			t.Errorf("partition %d over the bound: %v", p.GetPartition(), p)
		}
	}
	if len(resp.GetPartitions()) != 2 {
		t.Errorf("answered %d partitions, want 2", len(resp.GetPartitions()))
	}
	close(held.release)
	<-first
	if used := s.InflightProduceBytes(); used != 0 {
		t.Fatalf("%d bytes still charged after every produce was answered", used)
	}
	resp, _ = s.Produce(ctx, produceOf(15<<10, 15<<10))
	if c := resp.GetPartitions()[0].GetErrorCode(); c != skeinv1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Errorf("after the bound freed: %v, want the replica's own answer", c)
	}
	// Alone, a request above the whole bound still passes; a tiny one costs
	// MinProduceCharge.
	if charge, ok := s.acquire(1 << 30); !ok || charge != 64<<10 {
		t.Errorf("a request above the bound, alone: charge %d, %v", charge, ok)
	} else {
		s.release(charge)
	}
	if charge, ok := s.acquire(10); !ok || charge != MinProduceCharge {
		t.Errorf("a tiny request: charge %d, %v", charge, ok)
	} else {
		s.release(charge)
	}
}

func TestFetchAnswersAreCapped(t *testing.T) {
	for _, tc := range []struct {
		asked int32
		dflt  int
		want  int
	}{
		{0, 16 << 20, 16 << 20},
		{-5, 16 << 20, 16 << 20},
		{1 << 20, MaxFetchBytes, 1 << 20},
		{0, MaxFetchBytes, MaxFetchBytes},
		{math.MaxInt32, MaxFetchBytes, MaxFetchBytes},
		{math.MaxInt32, 16 << 20, MaxFetchBytes},
	} {
		if got := answerBytes(tc.asked, tc.dflt); got != tc.want {
			t.Errorf("answerBytes(%d, %d) = %d, want %d", tc.asked, tc.dflt, got, tc.want)
		}
	}
}

// A produce whose caller went away is no failure of the node: it is not
// logged as an error, while an unexpected error is, and the protocol's
// answers are not logged at all.
func TestProduceFailureLog(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	late, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name  string
		ctx   context.Context
		err   error
		level slog.Level
		ok    bool
	}{
		{"the caller's stream ended", gone, context.Canceled, slog.LevelDebug, true},
		{"the caller's deadline passed", late, context.DeadlineExceeded, slog.LevelDebug, true},
		{"cancelled, the caller still there", live, context.Canceled, slog.LevelError, true},
		{"an unexpected error", live, io.ErrUnexpectedEOF, slog.LevelError, true},
		{"the caller gone, an unexpected error", gone, io.ErrUnexpectedEOF, slog.LevelError, true},
		{"an answer of the protocol", live, errs.Errorf(errs.NotLeaderOrFollower, "moved"), 0, false},
	} {
		if _, level, ok := produceFailureLog(c.ctx, c.err); level != c.level || ok != c.ok {
			t.Errorf("%s: level %v, logged %v; want %v, %v", c.name, level, ok, c.level, c.ok)
		}
	}
}
