//go:build integration

package fault

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// adminBound: a controller election (1.5-2 s with 1 s Raft heartbeat and
// election timeouts) plus one bounded attempt at the silent controller
// (2 s), plus a metadata watch move (3 s of silence), with slack for a
// loaded machine.
const adminBound = 10 * time.Second

type clusterDesc struct {
	Controllers []struct {
		ID     int32  `json:"id"`
		Leader bool   `json:"leader"`
		State  string `json:"state"`
	} `json:"controllers"`
}

func (c *devCluster) controllerPID(id int32) int {
	for _, p := range c.processes() {
		if p.Role == "controller" && int32(p.ID) == id {
			return p.PID
		}
	}
	c.t.Fatalf("no controller %d in cluster.json", id)
	return 0
}

// raftLeader answers the leading controller as GET /v1/cluster says, with
// how long the call took.
func (c *devCluster) raftLeader(timeout time.Duration) (int32, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	var d clusterDesc
	if err := c.do(ctx, "GET", "/v1/cluster", nil, &d); err != nil {
		return -1, time.Since(start), err
	}
	for _, ct := range d.Controllers {
		if ct.Leader {
			return ct.ID, time.Since(start), nil
		}
	}
	return -1, time.Since(start), fmt.Errorf("no leader in %+v", d.Controllers)
}

// controllerState answers controller id's state as GET /v1/cluster says.
func (c *devCluster) controllerState(id int32) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d clusterDesc
	if err := c.do(ctx, "GET", "/v1/cluster", nil, &d); err != nil {
		return "", err
	}
	for _, ct := range d.Controllers {
		if ct.ID == id {
			return ct.State, nil
		}
	}
	return "", fmt.Errorf("no controller %d in %+v", id, d.Controllers)
}

// wantControllerState waits for GET /v1/cluster to show controller id in
// state want.
func (c *devCluster) wantControllerState(id int32, want string) {
	c.eventually(adminBound, fmt.Sprintf("GET /v1/cluster showing controller-%d %s", id, want), func() error {
		st, err := c.controllerState(id)
		if err == nil && st != want {
			err = fmt.Errorf("controller-%d is %q", id, st)
		}
		return err
	})
}

// A paused controller — the Raft leader, then each of the others — does not
// stall the gateway's admin calls or its metadata: within adminBound of the
// pause, GET /v1/cluster names a live leader, a topic create is answered and
// the new topic's leaders reach the gateway's metadata (a produce to it is
// acknowledged); no call waits past its deadline. GET /v1/cluster shows
// the paused controller DEAD, and ALIVE again once it resumes.
func TestPausedControllerDoesNotStallAdmin(t *testing.T) {
	c := startDev(t)
	c.createTopic("warmup", 1, 3, 2)
	// The Raft leader first, then the two others: one of the three is the
	// controller the gateway's metadata watch follows.
	var first int32
	c.eventually(20*time.Second, "a Raft leader", func() (err error) { first, _, err = c.raftLeader(10 * time.Second); return err })
	for round, victim := range []int32{first, first%3 + 1, (first+1)%3 + 1} {
		pid := c.controllerPID(victim)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		pausedAt := time.Now()
		t.Logf("round %d: SIGSTOP controller-%d", round, victim)

		var leader int32
		c.eventually(adminBound, "GET /v1/cluster naming a live leader", func() error {
			l, took, err := c.raftLeader(5 * time.Second)
			if err == nil && l == victim {
				err = fmt.Errorf("the paused controller %d is still named leader", l)
			}
			if took > 5*time.Second+time.Second {
				t.Errorf("GET /v1/cluster took %v, past its 5 s deadline", took)
			}
			leader = l
			return err
		})
		t.Logf("round %d: /v1/cluster names controller-%d leader %v after the pause", round, leader, time.Since(pausedAt).Round(time.Millisecond))

		topic := fmt.Sprintf("after-pause-%d", round)
		body := map[string]any{"name": topic, "partitions": 1, "replication_factor": 3}
		c.eventually(adminBound, "a topic create", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := c.do(ctx, "POST", "/v1/topics", body, nil)
			if err != nil && strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
				return nil // an earlier attempt went through
			}
			return err
		})
		created := time.Since(pausedAt)
		c.eventually(adminBound, "a produce to the new topic", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return c.do(ctx, "POST", "/v1/topics/"+topic+"/records", map[string]any{"records": []map[string]any{{"value": "x"}}}, nil)
		})
		t.Logf("round %d: topic created %v and produced to %v after the pause", round, created.Round(time.Millisecond), time.Since(pausedAt).Round(time.Millisecond))
		c.wantControllerState(victim, "DEAD")
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		c.wantControllerState(victim, "ALIVE")
		time.Sleep(3 * time.Second) // let it catch up before the next round
	}
}
