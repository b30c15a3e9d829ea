//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// Tail over gRPC on a real cluster: from an offset, the records already
// there, then each one as it is committed, in order and once; a request it
// cannot serve is refused with its code before any response.
func TestTailStreamsEachCommitInOrder(t *testing.T) {
	d := devCluster(t)
	ctx := testCtx(t, 60*time.Second)
	createTopic(ctx, t, restClient(d), "tail-e2e", 1, 3, map[string]string{"min.insync.replicas": "2"})
	conn := grpcConn(t, d)
	prod := skeinv1.NewProducerServiceClient(conn)
	cons := skeinv1.NewConsumerServiceClient(conn)
	produce := func(v string) int64 {
		t.Helper()
		resp, err := prod.Produce(ctx, &skeinv1.ProduceRequest{Topic: "tail-e2e", Records: []*skeinv1.ProduceRecord{{Value: &v}}})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetResults()[0]
		if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
			t.Fatalf("produce %q: %v %s", v, r.GetErrorCode(), r.GetMessage())
		}
		return r.GetOffset()
	}
	var want []string
	for i := range 3 {
		v := fmt.Sprint("before-", i)
		if off := produce(v); off >= 1 {
			want = append(want, fmt.Sprintf("%d:%s", off, v))
		}
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cons.Tail(tctx, &skeinv1.TailRequest{Topic: "tail-e2e", Offset: ptr[int64](1)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	read := func(n int) {
		t.Helper()
		for len(got) < n {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatalf("tail after %v: %v", got, err)
			}
			for _, r := range resp.GetRecords() {
				got = append(got, fmt.Sprintf("%d:%s", r.GetOffset(), r.GetValue()))
			}
			if resp.GetNextOffset() != resp.GetRecords()[len(resp.GetRecords())-1].GetOffset()+1 {
				t.Fatalf("a response ending at offset %d says next_offset %d", resp.GetRecords()[len(resp.GetRecords())-1].GetOffset(), resp.GetNextOffset())
			}
		}
	}
	read(2)
	// Each later commit arrives on the stream, one produce at a time.
	for i := range 10 {
		v := fmt.Sprint("after-", i)
		want = append(want, fmt.Sprintf("%d:%s", produce(v), v))
		read(len(want))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tailed %v, want %v", got, want)
	}

	for _, tc := range []struct {
		name string
		req  *skeinv1.TailRequest
		want *errs.Error
	}{
		{"an offset past the log end", &skeinv1.TailRequest{Topic: "tail-e2e", Offset: ptr[int64](1000)}, errs.OffsetOutOfRange},
		{"a negative offset", &skeinv1.TailRequest{Topic: "tail-e2e", Offset: ptr[int64](-1)}, errs.OffsetOutOfRange},
		{"a partition that does not exist", &skeinv1.TailRequest{Topic: "tail-e2e", Partition: 5}, errs.UnknownTopicOrPartition},
		{"a topic that does not exist", &skeinv1.TailRequest{Topic: "tail-e2e-none"}, errs.UnknownTopicOrPartition},
	} {
		s, err := cons.Tail(ctx, tc.req)
		if err == nil {
			_, err = s.Recv()
		}
		if got := errs.Of(rpcerr.FromStatus(err)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
