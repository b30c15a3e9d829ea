package bench

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	skeinv1 "skein/gen/skein/v1"
)

// fakeGroups serves GroupService over a fakeGateway's logs: every member is
// assigned both partitions (enough to drive the load loop).
type fakeGroups struct {
	skeinv1.UnimplementedGroupServiceServer
	g       *fakeGateway
	mu      sync.Mutex
	commits map[int32]int64
	left    int
	// minBytes counts the fetches by the min_bytes they asked for (-1: none).
	minBytes map[int32]int
}

func (f *fakeGroups) JoinGroup(context.Context, *skeinv1.JoinGroupRequest) (*skeinv1.JoinGroupResponse, error) {
	return &skeinv1.JoinGroupResponse{MemberId: "m", MemberEpoch: 1}, nil
}

func (f *fakeGroups) FetchGroupRecords(_ context.Context, req *skeinv1.FetchGroupRecordsRequest) (*skeinv1.FetchGroupRecordsResponse, error) {
	f.mu.Lock()
	if req.MinBytes == nil {
		f.minBytes[-1]++
	} else {
		f.minBytes[req.GetMinBytes()]++
	}
	f.mu.Unlock()
	pos := map[int32]int64{}
	for _, p := range req.GetPositions() {
		pos[p.GetPartition()] = p.GetOffset()
	}
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	out := &skeinv1.FetchGroupRecordsResponse{MemberEpoch: 1}
	for p := int32(0); p < 2; p++ {
		log := f.g.logs[p]
		from := int(pos[p])
		to := min(len(log), from+int(req.GetMaxRecords())-len(out.Records))
		for o := from; o < to; o++ {
			out.Records = append(out.Records, &skeinv1.ConsumedRecord{Partition: p, Offset: int64(o), ValueBytes: log[o]})
		}
		out.Positions = append(out.Positions, &skeinv1.TopicPartitionOffset{Topic: "t", Partition: p, Offset: int64(max(to, from))})
	}
	return out, nil
}

func (f *fakeGroups) CommitOffsets(_ context.Context, req *skeinv1.CommitOffsetsRequest) (*skeinv1.CommitOffsetsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range req.GetOffsets() {
		f.commits[o.GetPartition()] = o.GetOffset()
	}
	return &skeinv1.CommitOffsetsResponse{}, nil
}

func (f *fakeGroups) LeaveGroup(context.Context, *skeinv1.LeaveGroupRequest) (*skeinv1.LeaveGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left++
	return &skeinv1.LeaveGroupResponse{}, nil
}

func TestGroupConsumeThroughTheGateway(t *testing.T) {
	for _, minBytes := range []int32{0, 4096} {
		g := &fakeGateway{logs: map[int32][][]byte{}}
		for p := int32(0); p < 2; p++ {
			for range 500 {
				g.logs[p] = append(g.logs[p], Payload(nil, 100, time.Now()))
			}
		}
		f := &fakeGroups{g: g, commits: map[int32]int64{}, minBytes: map[int32]int{}}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		skeinv1.RegisterGroupServiceServer(s, f)
		go s.Serve(lis)
		t.Cleanup(s.Stop)
		sum, err := GroupConsume(context.Background(), GroupConsumeConfig{Endpoints: Endpoints{Gateway: lis.Addr().String()}, Topic: "t", Group: "g",
			Members: 1, NumRecords: 1000, MaxRecords: 300, MaxWait: 10 * time.Millisecond, MinBytes: minBytes})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Records != 1000 || sum.Mode != "group-consume" || sum.Group != "g" || sum.EndToEnd == nil || sum.EndToEnd.Count != 1000 {
			t.Errorf("min bytes %d: summary %+v", minBytes, sum)
		}
		f.mu.Lock()
		if f.commits[0] != 500 || f.commits[1] != 500 || f.left != 1 {
			t.Errorf("min bytes %d: commits %v, left %d: want every position committed and the member gone", minBytes, f.commits, f.left)
		}
		asked := minBytes
		if asked == 0 {
			asked = -1 // left out of the request
		}
		if f.minBytes[asked] == 0 || len(f.minBytes) != 1 {
			t.Errorf("min bytes %d: fetches by the min_bytes they asked for (-1: none): %v", minBytes, f.minBytes)
		}
		f.mu.Unlock()
	}
}
