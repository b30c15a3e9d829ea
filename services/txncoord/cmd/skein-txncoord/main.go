// Command skein-txncoord is a Skein transaction coordinator: it serves the
// transactional ids that hash to the __transaction_state partitions the
// controller gives it (TransactionCoordinatorService) — producer ids and
// epochs, the transactions' states, kept in that topic, and the commit and
// abort markers it writes to every partition of a transaction — and gives
// idempotent producers fresh producer ids.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"

	txnv1 "skein/gen/skein/txn/v1"
	"skein/libs/client"
	"skein/libs/cliflag"
	"skein/libs/coordproc"
	"skein/libs/membership"
	"skein/services/txncoord/internal/coordinator"
	"skein/services/txncoord/internal/server"
	"skein/services/txncoord/internal/txn"
)

const defaultHTTPAddr = "127.0.0.1:9611"

type config struct {
	proc         coordproc.Config
	maxTimeout   time.Duration
	idExpiration time.Duration
	writeTimeout time.Duration
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(coordproc.Healthcheck(os.Args[2:], defaultHTTPAddr))
	}
	c := config{proc: coordproc.Config{Service: "skein-txncoord", What: "transaction coordinator", Role: membership.RoleTransactionCoordinator}}
	d := txn.DefaultConfig()
	fs := flag.NewFlagSet("skein-txncoord", flag.ExitOnError)
	coordproc.AddFlags(fs, &c.proc, coordproc.Defaults{GRPCAddr: "127.0.0.1:9601", HTTPAddr: defaultHTTPAddr, GossipAddr: "127.0.0.1:9621"},
		"transaction coordinator", "TransactionCoordinatorService")
	fs.DurationVar(&c.maxTimeout, "transaction-max-timeout", d.MaxTimeout, "transaction.max.timeout.ms: the longest transaction timeout a producer may ask for")
	fs.DurationVar(&c.idExpiration, "transactional-id-expiration", d.IDExpiration, "transactional.id.expiration.ms: an idle transactional id is forgotten after this long")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 5*time.Second, "bound on one acks=all write to __transaction_state, retries included")
	if err := cliflag.Parse(fs, os.Args[1:], os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(cliflag.ExitCode(err))
	}
	if err := coordproc.Run(c.proc, c.build); err != nil {
		fmt.Fprintln(os.Stderr, "skein-txncoord:", err)
		os.Exit(1)
	}
}

// build makes the transaction coordinator the shared process shell runs.
func (c config) build(env coordproc.Env) (coordproc.Parts, error) {
	nodeID, cl := int32(c.proc.NodeID), env.Client
	groupCoordinators := cl.Groups()
	coord := coordinator.New(coordinator.Config{
		NodeID:             nodeID,
		Txn:                txn.Config{MaxTimeout: c.maxTimeout, IDExpiration: c.idExpiration},
		WriteTimeout:       c.writeTimeout,
		AllocateProducerID: cl.AllocateProducerID,
		CompleteGroupOffsets: func(ctx context.Context, groups []string, pid int64, epoch int16, commit bool) error {
			for _, g := range groups {
				if err := groupCoordinators.CompleteTxnOffsets(ctx, g, pid, epoch, commit); err != nil {
					return fmt.Errorf("group %q: %w", g, err)
				}
			}
			return nil
		},
		Logger: env.Logger,
	}, coordinator.ClientLog{C: cl}, markers{cl}, coordinator.NewMetrics(env.Registry))
	return coordproc.Parts{
		Register: func(s *grpc.Server) {
			txnv1.RegisterTransactionCoordinatorServiceServer(s, server.New(coord, env.Authorizer))
		},
		Rules: server.Rules(),
		Ready: func() (bool, string) {
			return coord.Registered(), "the controllers' metadata does not list this coordinator yet"
		},
		Follow: func(ctx context.Context) { coordinator.Follow(ctx, cl, coord, nodeID, env.Incarnation) },
		Close: func() {
			coord.Close()
			groupCoordinators.Close()
		},
	}, nil
}

// markers writes transaction markers through the storage nodes' leaders.
type markers struct{ cl *client.Client }

func (m markers) WriteMarkers(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32, partitions []txn.TopicPartition) error {
	tps := make([]client.TopicPartition, len(partitions))
	for i, p := range partitions {
		tps[i] = client.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	return m.cl.WriteTxnMarkers(ctx, client.TxnMarker{ProducerID: producerID, ProducerEpoch: epoch, Commit: commit, CoordinatorEpoch: coordinatorEpoch}, tps)
}
