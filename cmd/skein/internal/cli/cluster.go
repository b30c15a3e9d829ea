package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	skeinv1 "skein/gen/skein/v1"
)

func clusterCmd(ctx context.Context, args []string, io IO) error {
	f := newFlags("cluster", io, true)
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("cluster takes no arguments")
	}
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	cctx, cancel := timeout(ctx)
	defer cancel()
	resp, err := skeinv1.NewAdminServiceClient(conn).GetCluster(cctx, &skeinv1.GetClusterRequest{})
	if err != nil {
		return err
	}
	if *f.json {
		return printJSON(io.Out, resp)
	}
	fmt.Fprintf(io.Out, "Cluster %s, controller leader %d\n\n", resp.GetClusterId(), resp.GetControllerId())
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BROKER\tADDRESS\tRACK\tSTATE")
	for _, b := range resp.GetBrokers() {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", b.GetId(), b.GetGrpcAddr(), b.GetRack(), b.GetState())
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "CONTROLLER\tADDRESS\tLEADER\tSTATE")
	for _, c := range resp.GetControllers() {
		st := c.GetState()
		if st == "" {
			st = "-" // the answering controller runs without gossip
		}
		fmt.Fprintf(tw, "%d\t%s\t%v\t%s\n", c.GetId(), c.GetAddr(), c.GetLeader(), st)
	}
	if len(resp.GetCoordinators()) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "COORDINATOR\tADDRESS\tKIND\tSTATE")
		for _, c := range resp.GetCoordinators() {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", c.GetId(), c.GetGrpcAddr(), c.GetKind(), c.GetState())
		}
	}
	return tw.Flush()
}
