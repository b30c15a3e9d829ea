package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	skeinv1 "skein/gen/skein/v1"
)

// txnCmd is kafka-transactions.sh's list and describe: what the
// transaction coordinators hold, to find the open transaction that holds a
// partition's last stable offset back.
func txnCmd(ctx context.Context, args []string, stdio IO) error {
	if len(args) == 0 {
		return usagef("txn needs a subcommand: list or describe")
	}
	sub, args := args[0], args[1:]
	if subcommandHelp(stdio.Out, "txn", sub) {
		return flag.ErrHelp
	}
	f := newFlags("txn "+sub, stdio, true)
	var state *string
	switch sub {
	case "list":
		state = f.String("state", "", "only ids in this state (ONGOING, PREPARE_COMMIT, ...; Kafka's Ongoing spelling too)")
	case "describe":
	default:
		return usagef("unknown txn subcommand %q", sub)
	}
	pos, err := f.parseSub("txn", sub, args)
	if err != nil {
		return err
	}
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	txns := skeinv1.NewTransactionServiceClient(conn)
	cctx, cancel := timeout(ctx)
	defer cancel()

	if sub == "list" {
		req := &skeinv1.ListTransactionsRequest{}
		if *state != "" {
			req.State = []string{*state}
		}
		resp, err := txns.ListTransactions(cctx, req)
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(stdio.Out, resp)
		}
		tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TRANSACTIONAL-ID\tPRODUCER-ID\tSTATE")
		for _, x := range resp.GetTransactions() {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", x.GetTransactionalId(), x.GetProducerId(), x.GetState())
		}
		return tw.Flush()
	}
	resp, err := txns.DescribeTransaction(cctx, &skeinv1.DescribeTransactionRequest{TransactionalId: pos[0]})
	if err != nil {
		return err
	}
	if *f.json {
		return printJSON(stdio.Out, resp)
	}
	return printTransaction(stdio.Out, resp, time.Now())
}

// printTransaction prints a description as kafka-transactions.sh describe
// does: one row, the age of a transaction not yet complete, and its
// partitions as topic-partition.
func printTransaction(w io.Writer, d *skeinv1.DescribeTransactionResponse, now time.Time) error {
	start, age := "-", "-"
	if ms := d.GetTransactionStartTimeMs(); ms >= 0 {
		start = fmt.Sprint(ms)
		switch d.GetState() {
		case "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT": // not yet complete: how long it has held its partitions
			age = fmt.Sprint(max(now.UnixMilli()-ms, 0))
		}
	}
	var parts []string
	for _, tp := range d.GetPartitions() {
		for _, p := range tp.GetPartitions() {
			parts = append(parts, fmt.Sprintf("%s-%d", tp.GetTopic(), p))
		}
	}
	list := func(s []string) string {
		if len(s) == 0 {
			return "-"
		}
		return strings.Join(s, ",")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL-ID\tPRODUCER-ID\tEPOCH\tSTATE\tTIMEOUT-MS\tSTART-TIME-MS\tDURATION-MS\tPARTITIONS\tGROUPS")
	fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", d.GetTransactionalId(), d.GetProducerId(), d.GetProducerEpoch(), d.GetState(),
		d.GetTransactionTimeoutMs(), start, age, list(parts), list(d.GetGroups()))
	return tw.Flush()
}
