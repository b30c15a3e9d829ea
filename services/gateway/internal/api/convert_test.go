package api

import (
	"testing"

	"google.golang.org/protobuf/proto"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
)

func TestResultsShareOneAllocationAndStayApart(t *testing.T) {
	in := []client.Result{
		{Partition: 2, Offset: 41, Timestamp: 1700},
		{Partition: 2, Offset: 7, Timestamp: 1699, Err: errs.Errorf(errs.NotEnoughReplicas, "isr is 1 of 3")},
		{Partition: 2, Offset: 8, Err: errs.Errorf(errs.RequestTimedOut, "no answer"), MaybeWritten: true},
		{Partition: 2, Offset: 42, Timestamp: 1701},
	}
	want := []*skeinv1.ProduceResult{
		{Partition: 2, Offset: 41, TimestampMs: 1700},
		{Partition: 2, Offset: -1, TimestampMs: -1, ErrorCode: skeinv1.ErrorCode(errs.CodeOf(errs.NotEnoughReplicas)), Message: "isr is 1 of 3", Outcome: skeinv1.ProduceOutcome_NOT_WRITTEN},
		{Partition: 2, Offset: -1, TimestampMs: -1, ErrorCode: skeinv1.ErrorCode(errs.CodeOf(errs.RequestTimedOut)), Message: "no answer", Outcome: skeinv1.ProduceOutcome_UNKNOWN},
		{Partition: 2, Offset: 42, TimestampMs: 1701},
	}
	// Filled out of order, as the stream's callbacks may.
	got := newResults(len(in))
	for _, i := range []int{3, 1, 0, 2} {
		setResult(got[i], in[i])
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("result %d: got %v, want %v", i, got[i], want[i])
		}
		if one := toResult(in[i]); !proto.Equal(one, want[i]) {
			t.Errorf("toResult %d: got %v, want %v", i, one, want[i])
		}
	}
	// The encoded response reads back the same.
	b, err := proto.Marshal(&skeinv1.ProduceResponse{Results: got})
	if err != nil {
		t.Fatal(err)
	}
	var back skeinv1.ProduceResponse
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&back, &skeinv1.ProduceResponse{Results: want}) {
		t.Errorf("round trip: got %v", &back)
	}
	if len(newResults(0)) != 0 {
		t.Error("newResults(0) is not empty")
	}
}
