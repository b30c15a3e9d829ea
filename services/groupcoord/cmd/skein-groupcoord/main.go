// Command skein-groupcoord is a Skein group coordinator: it serves the
// consumer groups whose ids hash to the __consumer_offsets partitions the
// controller gives it (GroupCoordinatorService), and keeps their state and
// committed offsets in that topic.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	groupv1 "skein/gen/skein/group/v1"
	"skein/libs/cliflag"
	"skein/libs/coordproc"
	"skein/libs/membership"
	"skein/services/groupcoord/internal/coordinator"
	"skein/services/groupcoord/internal/group"
	"skein/services/groupcoord/internal/server"
)

const defaultHTTPAddr = "127.0.0.1:9511"

type config struct {
	proc           coordproc.Config
	minSession     time.Duration
	maxSession     time.Duration
	defaultSession time.Duration
	heartbeat      time.Duration
	maxGroupSize   int
	writeTimeout   time.Duration
	lagInterval    time.Duration
	retention      time.Duration
	retentionCheck time.Duration
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(coordproc.Healthcheck(os.Args[2:], defaultHTTPAddr))
	}
	c := config{proc: coordproc.Config{Service: "skein-groupcoord", What: "group coordinator", Role: membership.RoleGroupCoordinator}}
	d := group.DefaultConfig()
	fs := flag.NewFlagSet("skein-groupcoord", flag.ExitOnError)
	coordproc.AddFlags(fs, &c.proc, coordproc.Defaults{GRPCAddr: "127.0.0.1:9501", HTTPAddr: defaultHTTPAddr, GossipAddr: "127.0.0.1:9521"},
		"group coordinator", "GroupCoordinatorService")
	fs.DurationVar(&c.minSession, "min-session-timeout", d.MinSessionTimeout, "group.consumer.min.session.timeout.ms: the shortest session a member may ask for")
	fs.DurationVar(&c.maxSession, "max-session-timeout", d.MaxSessionTimeout, "group.consumer.max.session.timeout.ms: the longest session a member may ask for")
	fs.DurationVar(&c.defaultSession, "session-timeout", d.DefaultSessionTimeout, "group.consumer.session.timeout.ms: a member's session when it asks for none")
	fs.DurationVar(&c.heartbeat, "heartbeat-interval", d.HeartbeatInterval, "group.consumer.heartbeat.interval.ms: answered to every member (one whose session is shorter than three of it is told a third of its session)")
	fs.IntVar(&c.maxGroupSize, "max-group-size", 0, "group.consumer.max.size: most members per group (0: no limit)")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 5*time.Second, "bound on one acks=all write to __consumer_offsets, retries included")
	fs.DurationVar(&c.lagInterval, "lag-interval", 10*time.Second, "how often committed offsets are compared with high watermarks for the lag metrics")
	fs.DurationVar(&c.retention, "offsets-retention", coordinator.DefaultOffsetsRetention,
		"offsets.retention.minutes: how long a partition's committed offset is kept once no member of its group subscribes to its topic, from the later of its commit and the last subscription; an empty group left with nothing is deleted")
	fs.DurationVar(&c.retentionCheck, "offsets-retention-check-interval", coordinator.DefaultRetentionCheckInterval,
		"offsets.retention.check.interval.ms: how often the offset retention is applied")
	if err := cliflag.Parse(fs, os.Args[1:], os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(cliflag.ExitCode(err))
	}
	if c.retention <= 0 || c.retentionCheck <= 0 {
		fmt.Fprintf(os.Stderr, "skein-groupcoord: --offsets-retention (%v) and --offsets-retention-check-interval (%v) must be positive\n", c.retention, c.retentionCheck)
		os.Exit(2)
	}
	if err := coordproc.Run(c.proc, c.build); err != nil {
		fmt.Fprintln(os.Stderr, "skein-groupcoord:", err)
		os.Exit(1)
	}
}

// build makes the group coordinator the shared process shell runs.
func (c config) build(env coordproc.Env) (coordproc.Parts, error) {
	nodeID := int32(c.proc.NodeID)
	txns := env.Client.Transactions()
	coord := coordinator.New(coordinator.Config{
		NodeID: nodeID,
		Group: group.Config{MinSessionTimeout: c.minSession, MaxSessionTimeout: c.maxSession, DefaultSessionTimeout: c.defaultSession,
			HeartbeatInterval: c.heartbeat, MaxSize: c.maxGroupSize},
		WriteTimeout:           c.writeTimeout,
		LagInterval:            c.lagInterval,
		OffsetsRetention:       c.retention,
		RetentionCheckInterval: c.retentionCheck,
		NewMemberID:            uuid.NewString,
		Transactions:           coordinator.ClientTxns{T: txns},
		Logger:                 env.Logger,
	}, coordinator.ClientLog{C: env.Client}, coordinator.NewMetrics(env.Registry))
	return coordproc.Parts{
		Register: func(s *grpc.Server) {
			groupv1.RegisterGroupCoordinatorServiceServer(s, server.New(coord, env.Authorizer))
		},
		Rules: server.Rules(),
		Ready: func() (bool, string) {
			return coord.Registered(), "the controllers' metadata does not list this coordinator yet"
		},
		Follow: func(ctx context.Context) { coordinator.Follow(ctx, env.Client, coord, nodeID, env.Incarnation) },
		Close: func() {
			coord.Close()
			txns.Close()
		},
	}, nil
}
