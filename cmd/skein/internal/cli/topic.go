package cli

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/topicconfig"
)

// configFlag collects repeated --config KEY=VALUE.
type configFlag map[string]string

func (c configFlag) String() string { return fmt.Sprint(map[string]string(c)) }

func (configFlag) repeatable() {}

func (c configFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	c[k] = val
	return nil
}

func topicCmd(ctx context.Context, args []string, io IO) error {
	if len(args) == 0 {
		return usagef("topic needs a subcommand: create, list, describe, alter, delete, delete-records or elect-leaders")
	}
	sub, args := args[0], args[1:]
	if subcommandHelp(io.Out, "topic", sub) {
		return flag.ErrHelp
	}
	f := newFlags("topic "+sub, io, true)
	configs := configFlag{}
	var partitions, rf *int
	var internal, all *bool
	var election *string
	before := beforeFlag{}
	switch sub {
	case "create":
		partitions = f.Int("partitions", 0, "partitions (default 1)")
		rf = f.Int("replication-factor", 0, "replicas per partition (default min(3, live brokers))")
		f.Var(configs, "config", "topic config KEY=VALUE (repeatable), e.g. retention.ms=60000")
	case "alter":
		partitions = f.Int("partitions", 0, "grow the topic to this many partitions")
		f.Var(configs, "config", "topic config KEY=VALUE (repeatable); an empty VALUE removes the override")
	case "list":
		internal = f.Bool("internal", false, "include internal topics")
	case "describe", "delete":
	case "delete-records":
		f.Var(before, "before", "PARTITION=OFFSET (repeatable): delete the partition's records before OFFSET; -1 is its high watermark")
		all = f.Bool("all", false, "delete every record written so far, in every partition (each before its high watermark)")
	case "elect-leaders":
		election = f.String("type", "preferred", "preferred (give each partition back to its first replica) or unclean (elect an out-of-sync replica for a partition with no in-sync one: may lose acknowledged records)")
	default:
		return usagef("unknown topic subcommand %q", sub)
	}
	pos, err := f.parseSub("topic", sub, args)
	if err != nil {
		return err
	}
	given := map[string]bool{} // a count of 0 given is sent (and refused), not read as unset
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	admin := skeinv1.NewAdminServiceClient(conn)
	cctx, cancel := timeout(ctx)
	defer cancel()

	var nParts, nRF int32
	if partitions != nil {
		if nParts, err = int32Flag("partitions", *partitions); err != nil {
			return err
		}
	}
	if rf != nil {
		if nRF, err = int32Flag("replication-factor", *rf); err != nil {
			return err
		}
	}
	switch sub {
	case "create":
		req := &skeinv1.CreateTopicRequest{Name: pos[0], Configs: configs}
		if given["partitions"] {
			req.Partitions = ptr(nParts)
		}
		if given["replication-factor"] {
			req.ReplicationFactor = ptr(nRF)
		}
		resp, err := admin.CreateTopic(cctx, req)
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(io.Out, resp.GetTopic())
		}
		fmt.Fprintf(io.Out, "created topic %s\n", pos[0])
		if t := resp.GetTopic(); t.GetTopicId() == "" && len(t.GetPartitions()) == 0 {
			// The gateway names a topic the caller may create but not
			// describe, and shows nothing else of it.
			fmt.Fprintln(io.Out, "(you may not describe it: ask for describe on the topic to see its partitions and configs)")
			return nil
		}
		return printTopic(io, resp.GetTopic())
	case "list":
		resp, err := admin.ListTopics(cctx, &skeinv1.ListTopicsRequest{IncludeInternal: *internal})
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(io.Out, resp)
		}
		tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICATION\tINTERNAL")
		for _, t := range resp.GetTopics() {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%v\n", t.GetName(), t.GetPartitions(), t.GetReplicationFactor(), t.GetInternal())
		}
		return tw.Flush()
	case "describe":
		resp, err := admin.DescribeTopic(cctx, &skeinv1.DescribeTopicRequest{Topic: pos[0]})
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(io.Out, resp.GetTopic())
		}
		return printTopic(io, resp.GetTopic())
	case "delete":
		resp, err := admin.DeleteTopic(cctx, &skeinv1.DeleteTopicRequest{Topic: pos[0]})
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(io.Out, resp)
		}
		fmt.Fprintf(io.Out, "deleted topic %s\n", pos[0])
		return nil
	case "elect-leaders":
		if !f.typed["type"] && !strings.EqualFold(*election, "preferred") {
			// An unclean election may lose acknowledged records: it is
			// asked for on the command line, never by a stray SKEIN_TYPE.
			return usagef("--type %s comes from the environment (SKEIN_TYPE): an election other than preferred is asked for with --type on the command line", *election)
		}
		return electLeaders(cctx, io, admin, pos[0], *election, *f.json)
	case "delete-records":
		// Longer than the 30 s a leader waits for its in-sync replicas,
		// so that a partition they did not follow in time is answered
		// with the others.
		dctx, dcancel := context.WithTimeout(ctx, 45*time.Second)
		defer dcancel()
		return deleteRecords(dctx, io, admin, pos[0], before, *all, *f.json)
	case "alter":
		if !given["partitions"] && len(configs) == 0 {
			return usagef("topic alter needs --partitions or --config")
		}
		// The configs are checked before the partitions are added: a bad
		// value must not leave the topic half changed.
		set := map[string]string{}
		for k, v := range configs {
			if v != "" { // "" resets a config to its default
				set[k] = v
			}
		}
		if err := topicconfig.Validate(set); err != nil {
			return err
		}
		var last *skeinv1.TopicDescription
		if given["partitions"] {
			resp, err := admin.CreatePartitions(cctx, &skeinv1.CreatePartitionsRequest{Topic: pos[0], Count: nParts})
			if err != nil {
				return err
			}
			last = resp.GetTopic()
		}
		if len(configs) > 0 {
			resp, err := admin.AlterTopicConfigs(cctx, &skeinv1.AlterTopicConfigsRequest{Topic: pos[0], Configs: configs})
			if err != nil {
				return err
			}
			last = resp.GetTopic()
		}
		if *f.json {
			return printJSON(io.Out, last)
		}
		return printTopic(io, last)
	}
	return nil
}

// beforeFlag collects repeated --before PARTITION=OFFSET.
type beforeFlag map[int32]int64

func (b beforeFlag) String() string { return fmt.Sprint(map[int32]int64(b)) }

func (beforeFlag) repeatable() {}

func (b beforeFlag) Set(v string) error {
	ps, ofs, ok := strings.Cut(v, "=")
	p, perr := strconv.ParseInt(ps, 10, 32)
	o, oerr := strconv.ParseInt(ofs, 10, 64)
	if !ok || perr != nil || oerr != nil || p < 0 || o < -1 {
		return fmt.Errorf("want PARTITION=OFFSET (a partition of 0 or more, an offset of -1 or more), got %q", v)
	}
	if _, dup := b[int32(p)]; dup {
		return fmt.Errorf("partition %d is named twice", p)
	}
	b[int32(p)] = o
	return nil
}

// deleteRecords runs topic delete-records: the partitions of before, or
// every partition at its high watermark with all.
func deleteRecords(ctx context.Context, io IO, admin skeinv1.AdminServiceClient, topic string, before beforeFlag, all, asJSON bool) error {
	if all && len(before) > 0 {
		return usagef("topic delete-records takes --before PARTITION=OFFSET or --all, not both")
	}
	if !all && len(before) == 0 {
		return usagef("topic delete-records needs --before PARTITION=OFFSET (repeatable) or --all")
	}
	req := &skeinv1.DeleteRecordsRequest{Topic: topic}
	if all {
		d, err := admin.DescribeTopic(ctx, &skeinv1.DescribeTopicRequest{Topic: topic})
		if err != nil {
			return err
		}
		for _, p := range d.GetTopic().GetPartitions() {
			req.Partitions = append(req.Partitions, &skeinv1.DeleteRecordsBefore{Partition: p.GetPartition(), Offset: -1})
		}
	}
	for _, p := range slices.Sorted(maps.Keys(before)) {
		req.Partitions = append(req.Partitions, &skeinv1.DeleteRecordsBefore{Partition: p, Offset: before[p]})
	}
	resp, err := admin.DeleteRecords(ctx, req)
	if err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(io.Out, resp); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tLOG START\tERROR")
		for _, r := range resp.GetPartitions() {
			e, start := "-", fmt.Sprint(r.GetLowWatermark())
			if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
				e, start = fmt.Sprintf("%s: %s", r.GetErrorCode(), r.GetMessage()), "-" // not known
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\n", r.GetPartition(), start, e)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	failed := 0
	for _, r := range resp.GetPartitions() {
		if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d partitions failed", failed, len(resp.GetPartitions()))
	}
	return nil
}

// printTopic shows a description: the topic, its effective configs, then a
// row per partition.
func printTopic(io IO, t *skeinv1.TopicDescription) error {
	fmt.Fprintf(io.Out, "Topic: %s  id: %s  partitions: %d  replication: %d  internal: %v\n",
		t.GetName(), t.GetTopicId(), len(t.GetPartitions()), t.GetReplicationFactor(), t.GetInternal())
	if len(t.GetConfigs()) > 0 {
		fmt.Fprintln(io.Out, "Configs (* set on the topic, the others are defaults):")
		for _, k := range slices.Sorted(maps.Keys(t.GetConfigs())) {
			mark := " "
			if slices.Contains(t.GetOverriddenConfigs(), k) {
				mark = "*"
			}
			fmt.Fprintf(io.Out, " %s%s=%s\n", mark, k, t.GetConfigs()[k])
		}
	}
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tLOG START\tHW\tLSO")
	for _, p := range t.GetPartitions() {
		// -1: the leader did not answer in time (one just elected, say).
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.GetPartition(), p.GetLeader(), p.GetLeaderEpoch(),
			ints(p.GetReplicas()), ints(p.GetIsr()), known(p.GetLogStartOffset()), known(p.GetHighWatermark()), known(p.GetLastStableOffset()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range t.GetPartitions() {
		if l := p.GetLostReplica(); l != nil {
			fmt.Fprintf(io.Out, "partition %d is offline: its last in-sync replica, broker %d, lost its logs (data directory %s); bring that disk back, or accept the loss: skein topic elect-leaders %s --type unclean\n",
				p.GetPartition(), l.GetBroker(), l.GetLogDirId(), t.GetName())
		}
	}
	return nil
}

// ints joins v with commas; "-" when it is empty (an offline partition
// whose last in-sync replica lost its logs has no ISR).
func ints(v []int32) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func ptr[T any](v T) *T { return &v }

// electLeaders runs a leader election for every partition of a topic, as
// kafka-leader-election.sh: preferred gives each partition back to its
// first replica, unclean elects an out-of-sync replica where no in-sync one
// is left. A partition whose leader is already the one asked for
// (ELECTION_NOT_NEEDED) is no failure; any other refusal makes the command
// exit 1 after every partition is printed.
func electLeaders(ctx context.Context, io IO, admin skeinv1.AdminServiceClient, topic, election string, asJSON bool) error {
	typ, ok := map[string]skeinv1.ElectionType{"preferred": skeinv1.ElectionType_PREFERRED, "unclean": skeinv1.ElectionType_UNCLEAN}[strings.ToLower(election)]
	if !ok {
		return usagef("--type %q: want preferred or unclean", election)
	}
	resp, err := admin.ElectLeaders(ctx, &skeinv1.ElectLeadersRequest{Topic: topic, Type: typ})
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range resp.GetResults() {
		if c := r.GetErrorCode(); c != skeinv1.ErrorCode_NONE && c != skeinv1.ErrorCode_ELECTION_NOT_NEEDED {
			failed++
		}
	}
	if asJSON {
		if err := printJSON(io.Out, resp); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tLEADER\tRESULT")
		for _, r := range resp.GetResults() {
			result := "elected"
			if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
				result = r.GetErrorCode().String() + ": " + r.GetMessage()
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\n", r.GetPartition(), r.GetLeader(), result)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d partition(s) of %s got no %s election", failed, len(resp.GetResults()), topic, strings.ToLower(election))
	}
	return nil
}
