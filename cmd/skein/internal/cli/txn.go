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
		return usagef("txn needs a subcommand: list, describe or describe-producers")
	}
	sub, args := args[0], args[1:]
	if subcommandHelp(stdio.Out, "txn", sub) {
		return flag.ErrHelp
	}
	f := newFlags("txn "+sub, stdio, true)
	var state, topic *string
	var part *int
	switch sub {
	case "list":
		state = f.String("state", "", "only ids in these states, comma-separated (ONGOING, PREPARE_COMMIT, ...; Kafka's Ongoing spelling too)")
	case "describe":
	case "describe-producers":
		topic = f.String("topic", "", "the partition's topic (required)")
		part = f.Int("partition", -1, "the partition (required)")
	default:
		return usagef("unknown txn subcommand %q", sub)
	}
	var pos []string
	var err error
	if sub == "describe-producers" {
		if pos, err = f.parse(args); err != nil {
			return err
		}
		switch {
		case len(pos) != 0:
			return usagef("txn describe-producers takes no argument, got %q", pos)
		case *topic == "":
			return usagef("describe-producers needs --topic")
		case *part < 0:
			return usagef("describe-producers needs --partition (0 or more)")
		}
	} else if pos, err = f.parseSub("txn", sub, args); err != nil {
		return err
	}
	var states []string
	if sub == "list" {
		for _, st := range strings.Split(*state, ",") {
			if st = strings.TrimSpace(st); st == "" {
				continue
			}
			if !knownTransactionState(st) {
				return usagef("--state %q: want one of %s (comma-separated; Kafka's PrepareCommit spelling too)", st, strings.Join(transactionStates, ", "))
			}
			states = append(states, st)
		}
	}
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	txns := skeinv1.NewTransactionServiceClient(conn)
	cctx, cancel := timeout(ctx)
	defer cancel()

	if sub == "describe-producers" {
		resp, err := skeinv1.NewAdminServiceClient(conn).DescribeProducers(cctx, &skeinv1.DescribeProducersRequest{Topic: *topic, Partition: int32(*part)})
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(stdio.Out, resp)
		}
		return printProducers(stdio.Out, resp)
	}

	if sub == "list" {
		resp, err := txns.ListTransactions(cctx, &skeinv1.ListTransactionsRequest{State: states})
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

// transactionStates are the states a transactional id shows.
var transactionStates = []string{"EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT", "DEAD"}

// knownTransactionState reports whether name is a state as the API spells
// it (PREPARE_COMMIT) or as Kafka's tools do (PrepareCommit), in any case.
func knownTransactionState(name string) bool {
	norm := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "_", "")) }
	for _, s := range transactionStates {
		if norm(s) == norm(name) {
			return true
		}
	}
	return false
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

// printProducers prints a partition's producers as kafka-transactions.sh
// describe-producers does, "-" for no last sequence and no open
// transaction.
func printProducers(w io.Writer, r *skeinv1.DescribeProducersResponse) error {
	dash := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return fmt.Sprint(v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRODUCER-ID\tEPOCH\tLAST-SEQUENCE\tLAST-TIMESTAMP-MS\tCOORDINATOR-EPOCH\tTXN-START-OFFSET")
	for _, p := range r.GetProducers() {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%d\t%s\n", p.GetProducerId(), p.GetProducerEpoch(), dash(int64(p.GetLastSequence())),
			p.GetLastTimestampMs(), p.GetCoordinatorEpoch(), dash(p.GetCurrentTransactionStartOffset()))
	}
	return tw.Flush()
}
