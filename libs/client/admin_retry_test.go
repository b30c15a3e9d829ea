package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/client"
	"skein/libs/client/clienttest"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// notYet answers CreateTopics with NOT_CONTROLLER while refusals last, as
// a quorum that is being restarted does, then as the controller does.
type notYet struct {
	*clienttest.Controller
	refusals atomic.Int32
}

func (n *notYet) CreateTopics(ctx context.Context, req *controllerv1.CreateTopicsRequest) (*controllerv1.CreateTopicsResponse, error) {
	if n.refusals.Add(-1) >= 0 {
		return nil, rpcerr.ToGRPC(errs.Errorf(errs.NotController, "no leader yet: an election is under way"))
	}
	return n.Controller.CreateTopics(ctx, req)
}

// An admin call goes on asking, round after round, until its deadline: a
// controller quorum that answers again after many refusals (a restart of
// every controller) gets the call, as Kafka's admin client waits out
// default.api.timeout.ms.
func TestAdminCallWaitsForTheQuorum(t *testing.T) {
	cl := clienttest.Start(t, 1)
	ctrl := &notYet{Controller: cl.Controller}
	ctrl.refusals.Store(20)
	addr, _ := clienttest.ServeController(t, ctrl)
	c := newClient(t, cl, addr)
	if _, err := c.CreateTopic(ctx(t), client.TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatalf("create after 20 refusals: %v", err)
	}
	if n := ctrl.refusals.Load(); n >= 0 {
		t.Fatalf("%d refusals left: the create never asked through them", n)
	}
}

// A call that runs out is answered with what a controller said, not with
// the last controller that could not be dialled.
func TestAdminCallAnswersWhatAControllerSaid(t *testing.T) {
	cl := clienttest.Start(t, 1)
	ctrl := &notYet{Controller: cl.Controller}
	ctrl.refusals.Store(1 << 30)
	addr, _ := clienttest.ServeController(t, ctrl)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	c2, err := client.New(client.Config{Controllers: []string{addr, dead}, RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = c2.CreateTopic(cctx, client.TopicSpec{Name: "t", Partitions: 1})
	if errs.Of(err) != errs.NotController || !strings.Contains(err.Error(), "election") {
		t.Fatalf("create with no quorum: %v; want the controller's NOT_CONTROLLER", err)
	}
}

// A call its caller cancels answers that, not a timeout.
func TestAdminCallCancelled(t *testing.T) {
	cl := clienttest.Start(t, 1)
	ctrl := &notYet{Controller: cl.Controller}
	ctrl.refusals.Store(1 << 30)
	addr, _ := clienttest.ServeController(t, ctrl)
	c := newClient(t, cl, addr)
	cctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := c.CreateTopic(cctx, client.TopicSpec{Name: "t", Partitions: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("create cancelled while the quorum refuses: %v, want context.Canceled", err)
	}
}
