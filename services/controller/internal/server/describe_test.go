package server

import (
	"fmt"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// controllerStates answers DescribeCluster's state of each controller, by
// id, as ctl answers it (once it holds metadata: a new cluster's leader
// answers NOT_CONTROLLER until it has named the cluster).
func controllerStates(t *testing.T, c *cluster, ctl *controller) map[int32]string {
	t.Helper()
	var d *controllerv1.DescribeClusterResponse
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		d, err = c.client(ctl).DescribeCluster(ctxT(t), &controllerv1.DescribeClusterRequest{})
		if err == nil {
			break
		}
		if errs.Of(rpcerr.FromStatus(err)) != errs.NotController || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	out := map[int32]string{}
	for _, n := range d.GetControllers() {
		out[n.GetId()] = n.GetState()
	}
	return out
}

// DescribeCluster tells which controllers gossip reaches: every one ALIVE
// while all run, a killed one DEAD as the survivors answer.
func TestDescribeClusterControllerStates(t *testing.T) {
	c := newCluster(t, 3, true, 2*time.Second)
	want := func(ctl *controller, states map[int32]string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := controllerStates(t, c, ctl)
			if fmt.Sprint(got) == fmt.Sprint(states) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("controller-%d describes the controllers as %v, want %v", ctl.id, got, states)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, ctl := range c.ctrls {
		want(ctl, map[int32]string{1: "ALIVE", 2: "ALIVE", 3: "ALIVE"})
	}
	c.ctrls[1].stop()
	want(c.ctrls[0], map[int32]string{1: "ALIVE", 2: "DEAD", 3: "ALIVE"})
	want(c.ctrls[2], map[int32]string{1: "ALIVE", 2: "DEAD", 3: "ALIVE"})
}

// Without gossip a controller cannot tell: the state is empty.
func TestDescribeClusterWithoutGossip(t *testing.T) {
	c := newCluster(t, 1, false, 2*time.Second)
	c.leader()
	if got := controllerStates(t, c, c.ctrls[0]); fmt.Sprint(got) != fmt.Sprint(map[int32]string{1: ""}) {
		t.Fatalf("states %v, want controller 1 with none", got)
	}
}
