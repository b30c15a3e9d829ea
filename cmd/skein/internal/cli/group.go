package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

func groupCmd(ctx context.Context, args []string, stdio IO) error {
	if len(args) == 0 {
		return usagef("group needs a subcommand: list, describe, reset-offsets, delete, delete-offsets, dlq or dlq-replay")
	}
	sub, args := args[0], args[1:]
	if subcommandHelp(stdio.Out, "group", sub) {
		return flag.ErrHelp
	}
	f := newFlags("group "+sub, stdio, true)
	var topic, dlqTopic, toDatetime, byDuration, states *string
	var toEarliest, toLatest, execute, dryRun, allTopics *bool
	var toOffset, toTimestamp, shiftBy *int64
	partitions := partitionsFlag{}
	switch sub {
	case "delete-offsets":
		topic = f.String("topic", "", "the topic whose committed offsets to delete (required)")
		f.Var(partitions, "partition", "a partition of --topic (repeatable); without it, every partition of the topic")
	case "reset-offsets":
		topic = f.String("topic", "", "the topic whose offsets to reset: TOPIC, or TOPIC:P,P,... for some of its partitions")
		allTopics = f.Bool("all-topics", false, "reset every topic the group has committed offsets of (instead of --topic)")
		toEarliest = f.Bool("to-earliest", false, "reset to each partition's log start")
		toLatest = f.Bool("to-latest", false, "reset to each partition's end")
		toOffset = f.Int64("to-offset", -1, "reset every partition to this offset (kept within the partition's log)")
		toTimestamp = f.Int64("to-timestamp", -1, "reset to the first offset at or after this time (ms since the epoch)")
		toDatetime = f.String("to-datetime", "", "reset to the first offset at or after this time: YYYY-MM-DDTHH:mm:SS[.sss], with a zone (Z, +01:00) or in local time")
		byDuration = f.String("by-duration", "", "reset to the first offset at or after this long ago: P1DT2H30M (ISO-8601, as Kafka's tool) or 26h30m")
		shiftBy = f.Int64("shift-by", 0, "move each partition's committed offset by N (negative: back), kept within the partition's log")
		execute = f.Bool("execute", false, "commit the new offsets (without it, only print them)")
		dryRun = f.Bool("dry-run", false, "only print the new offsets (the default; as Kafka's tool, for scripts to say so)")
	case "dlq", "dlq-replay":
		topic = f.String("topic", "", "the topic whose dead-lettered records to "+map[string]string{"dlq": "list", "dlq-replay": "produce back to it"}[sub]+" (required)")
		dlqTopic = f.String("dlq-topic", "", "the dead-letter topic to read (default: the group's dlq.topic, else TOPIC.dlq); one the group wrote to before its dlq.topic changed or its config was deleted")
	case "list":
		states = f.String("state", "", "only groups in these states, comma-separated: empty, reconciling, stable (any case, as kafka-consumer-groups --state)")
	case "describe", "delete":
	default:
		return usagef("unknown group subcommand %q", sub)
	}
	pos, err := f.parseSub("group", sub, args)
	if err != nil {
		return err
	}
	if sub == "delete-offsets" && *topic == "" {
		return usagef("delete-offsets needs --topic")
	}
	if sub == "dlq" || sub == "dlq-replay" {
		if *topic == "" {
			return usagef("%s needs --topic", sub)
		}
		// A --dlq-topic given empty ("--dlq-topic $DLQ" with $DLQ unset)
		// is refused rather than read as the lookup's: the records listed
		// or replayed would come from a topic other than the one meant.
		switch {
		case f.typed["dlq-topic"] && *dlqTopic == "":
			return usagef("--dlq-topic is empty: name the dead-letter topic to read, or leave --dlq-topic out for the group's own")
		case *dlqTopic == *topic:
			// The coordinator never dead-letters a record into its own
			// topic (INVALID_CONFIG): there is nothing there to find.
			return usagef("--dlq-topic %s is --topic itself: a group never dead-letters a record into its own topic", *dlqTopic)
		}
		cctx, cancel := timeout(ctx)
		defer cancel()
		if sub == "dlq" {
			return groupDLQ(cctx, f, stdio, pos[0], *topic, *dlqTopic)
		}
		return groupDLQReplay(cctx, f, stdio, pos[0], *topic, *dlqTopic)
	}
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	groups := skeinv1.NewGroupServiceClient(conn)
	cctx, cancel := timeout(ctx)
	defer cancel()

	switch sub {
	case "list":
		want := map[string]bool{}
		for _, st := range strings.Split(*states, ",") {
			switch st = strings.ToUpper(strings.TrimSpace(st)); st {
			case "":
			case "EMPTY", "RECONCILING", "STABLE", "DEAD":
				want[st] = true
			default:
				return usagef("--state %q: want empty, reconciling or stable (comma-separated)", st)
			}
		}
		resp, err := groups.ListGroups(cctx, &skeinv1.ListGroupsRequest{})
		if err != nil {
			return err
		}
		if len(want) > 0 {
			resp.Groups = slices.DeleteFunc(resp.Groups, func(g *skeinv1.GroupSummary) bool { return !want[strings.ToUpper(g.GetState())] })
		}
		if *f.json {
			return printJSON(stdio.Out, resp)
		}
		tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tSTATE\tMEMBERS")
		for _, g := range resp.GetGroups() {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", g.GetGroup(), g.GetState(), g.GetMembers())
		}
		return tw.Flush()
	case "describe":
		resp, err := groups.DescribeGroup(cctx, &skeinv1.DescribeGroupRequest{Group: pos[0]})
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(stdio.Out, resp)
		}
		return printGroup(stdio.Out, resp)
	case "delete-offsets":
		return deleteOffsets(cctx, stdio, groups, pos[0], *topic, partitions, *f.json)
	case "delete":
		if err := mustBeEmpty(cctx, groups, pos[0], "deleted"); err != nil {
			return err
		}
		resp, err := groups.DeleteGroup(cctx, &skeinv1.DeleteGroupRequest{Group: pos[0]})
		if err != nil {
			return err
		}
		if *f.json {
			return printJSON(stdio.Out, resp)
		}
		fmt.Fprintf(stdio.Out, "deleted group %s\n", pos[0])
		return nil
	}

	// reset-offsets
	var bad error
	f.Visit(func(fl *flag.Flag) {
		if v := map[string]*int64{"to-offset": toOffset, "to-timestamp": toTimestamp}[fl.Name]; v != nil && *v < 0 && bad == nil {
			bad = usagef("--%s %d: want 0 or more", fl.Name, *v)
		}
	})
	if bad != nil {
		return bad
	}
	var target resetTarget
	chosen := 0
	for _, c := range []struct {
		set  bool
		kind resetKind
		at   func() (int64, error)
	}{
		{*toEarliest, resetEarliest, nil},
		{*toLatest, resetLatest, nil},
		{*toOffset >= 0, resetOffset, func() (int64, error) { return *toOffset, nil }},
		{*toTimestamp >= 0, resetTime, func() (int64, error) { return *toTimestamp, nil }},
		{*toDatetime != "", resetTime, func() (int64, error) { return parseDatetime(*toDatetime) }},
		{*byDuration != "", resetTime, func() (int64, error) {
			d, err := parseDuration(*byDuration)
			return time.Now().Add(-d).UnixMilli(), err
		}},
		{f.typed["shift-by"], resetShift, func() (int64, error) { return *shiftBy, nil }},
	} {
		if !c.set {
			continue
		}
		chosen++
		target.kind = c.kind
		if c.at != nil {
			v, err := c.at()
			if err != nil {
				return err
			}
			target.value = v
		}
	}
	if chosen != 1 {
		return usagef("reset-offsets takes exactly one of --to-earliest, --to-latest, --to-offset N, --to-timestamp MS, --to-datetime TIME, --by-duration DURATION, --shift-by N")
	}
	if (*topic == "") == !*allTopics {
		return usagef("reset-offsets takes --topic TOPIC[:P,P,...] or --all-topics")
	}
	var parts []int32
	if *topic != "" {
		if *topic, parts, err = parseTopicSpec(*topic); err != nil {
			return err
		}
	}
	if *execute && *dryRun {
		return usagef("reset-offsets takes --execute or --dry-run, not both")
	}
	if err := mustBeEmpty(cctx, groups, pos[0], "reset"); err != nil {
		return err
	}
	var committed map[string]map[int32]int64
	topics := []string{*topic}
	if *allTopics || target.kind == resetShift {
		if committed, err = committedOffsets(cctx, groups, pos[0]); err != nil {
			return err
		}
		if *allTopics {
			if topics = slices.Sorted(maps.Keys(committed)); len(topics) == 0 {
				return fmt.Errorf("group %s has no committed offsets: name the topic to reset with --topic", pos[0])
			}
		}
	}
	var offsets []*skeinv1.TopicPartitionOffset
	for _, t := range topics {
		plan, err := resetPlan(cctx, skeinv1.NewAdminServiceClient(conn), committed, t, parts, target)
		if err != nil {
			return err
		}
		offsets = append(offsets, plan...)
	}
	commit := &skeinv1.CommitOffsetsRequest{Group: pos[0], MemberId: "", MemberEpoch: -1, Offsets: offsets}
	if !*execute {
		// As Kafka's kafka-consumer-groups: without --execute nothing
		// changes; the plan is printed (as JSON, the commit that
		// --execute would send).
		if *f.json {
			return printJSON(stdio.Out, commit)
		}
		if err := printResetPlan(stdio.Out, offsets, nil); err != nil {
			return err
		}
		if !*dryRun {
			fmt.Fprintf(stdio.Err, "dry run: group %s's offsets are unchanged; add --execute to commit them\n", pos[0])
		}
		return nil
	}
	resp, err := groups.CommitOffsets(cctx, commit)
	if err != nil {
		return err
	}
	// A partition counts as reset only with a result of its own saying so.
	type tp struct {
		topic string
		part  int32
	}
	done := map[tp]bool{}
	for _, r := range resp.GetResults() {
		if r.GetErrorCode() == skeinv1.ErrorCode_NONE {
			done[tp{r.GetTopic(), r.GetPartition()}] = true
		}
	}
	failed := 0
	for _, o := range offsets {
		if !done[tp{o.GetTopic(), o.GetPartition()}] {
			failed++
		}
	}
	if *f.json {
		if err := printJSON(stdio.Out, resp); err != nil {
			return err
		}
	} else if err := printResetPlan(stdio.Out, offsets, resp.GetResults()); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d partitions of %s were not reset", failed, len(offsets), strings.Join(topics, ", "))
	}
	return nil
}

// partitionsFlag collects repeated --partition N.
type partitionsFlag map[int32]bool

func (p partitionsFlag) String() string { return fmt.Sprint(slices.Sorted(maps.Keys(p))) }

func (partitionsFlag) repeatable() {}

func (p partitionsFlag) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return fmt.Errorf("want a partition number, 0 or more, got %q", v)
	}
	if p[int32(n)] {
		return fmt.Errorf("partition %d is named twice", n)
	}
	p[int32(n)] = true
	return nil
}

// deleteOffsets runs group delete-offsets, as kafka-consumer-groups
// --delete-offsets: the group's committed offsets of the topic's
// partitions named (all of them when none is) go, and each partition's
// outcome is printed. A partition that keeps its offset (a member of the
// group reads the topic, say) is an error at the end.
func deleteOffsets(ctx context.Context, stdio IO, groups skeinv1.GroupServiceClient, group, topic string, partitions partitionsFlag, asJSON bool) error {
	resp, err := groups.DeleteOffsets(ctx, &skeinv1.DeleteOffsetsRequest{Group: group, Topic: topic, Partition: slices.Sorted(maps.Keys(partitions))})
	if err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(stdio.Out, resp); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tRESULT")
		for _, r := range resp.GetResults() {
			result := "deleted"
			if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
				result = fmt.Sprintf("%s: %s", r.GetErrorCode(), r.GetMessage())
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", r.GetTopic(), r.GetPartition(), result)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	// A partition counts as deleted only with a result of its own saying so.
	deleted := map[int32]bool{}
	subscribed := false
	for _, r := range resp.GetResults() {
		if r.GetErrorCode() == skeinv1.ErrorCode_NONE && r.GetTopic() == topic {
			deleted[r.GetPartition()] = true
		}
		subscribed = subscribed || r.GetErrorCode() == skeinv1.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC
	}
	asked := slices.Sorted(maps.Keys(partitions))
	if len(asked) == 0 { // every partition of the topic: the answer names them
		for _, r := range resp.GetResults() {
			asked = append(asked, r.GetPartition())
		}
	}
	kept := 0
	for _, p := range asked {
		if !deleted[p] {
			kept++
		}
	}
	switch {
	case kept > 0 && subscribed:
		return fmt.Errorf("group %s's offsets of %d of %d partition(s) of %s were not deleted: members of the group read %s; stop them, or subscribe them elsewhere, first",
			group, kept, len(asked), topic, topic)
	case kept > 0:
		return fmt.Errorf("group %s's offsets of %d of %d partition(s) of %s were not deleted", group, kept, len(asked), topic)
	}
	return nil
}

// printResetPlan prints each partition's new offset and, once committed,
// its result.
func printResetPlan(w io.Writer, offsets []*skeinv1.TopicPartitionOffset, results []*skeinv1.PartitionCommitResult) error {
	type tp struct {
		topic string
		part  int32
	}
	res := map[tp]*skeinv1.PartitionCommitResult{}
	for _, r := range results {
		res[tp{r.GetTopic(), r.GetPartition()}] = r
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if results == nil {
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tNEW OFFSET")
	} else {
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tNEW OFFSET\tRESULT")
	}
	for _, o := range offsets {
		fmt.Fprintf(tw, "%s\t%d\t%d", o.GetTopic(), o.GetPartition(), o.GetOffset())
		if results != nil {
			r, ok := res[tp{o.GetTopic(), o.GetPartition()}]
			switch {
			case !ok:
				fmt.Fprint(tw, "\tno answer")
			case r.GetErrorCode() == skeinv1.ErrorCode_NONE:
				fmt.Fprint(tw, "\tcommitted")
			default:
				fmt.Fprintf(tw, "\t%s: %s", r.GetErrorCode(), r.GetMessage())
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// mustBeEmpty refuses, with a message saying what to do, to change a group
// that has members. A group that does not exist yet is empty.
func mustBeEmpty(ctx context.Context, groups skeinv1.GroupServiceClient, group, verb string) error {
	d, err := groups.DescribeGroup(ctx, &skeinv1.DescribeGroupRequest{Group: group})
	if err != nil {
		if errs.Of(rpcerr.FromStatus(err)) == errs.GroupIDNotFound && verb == "reset" {
			return nil
		}
		return err
	}
	if n := len(d.GetMembers()); n > 0 {
		return fmt.Errorf("group %s has %d member(s) (state %s): it can be %s only while it has none; stop its consumers first", group, n, d.GetState(), verb)
	}
	return nil
}

func printGroup(w io.Writer, d *skeinv1.DescribeGroupResponse) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "group %s  state %s  epoch %d  assignor %s  total lag %d\n\n", d.GetGroup(), d.GetState(), d.GetGroupEpoch(), d.GetAssignor(), d.GetTotalLag())
	fmt.Fprintln(tw, "MEMBER\tINSTANCE\tEPOCH\tTOPICS\tASSIGNMENT")
	for _, m := range d.GetMembers() {
		var parts []string
		for _, a := range m.GetAssignment() {
			parts = append(parts, fmt.Sprintf("%s:%v", a.GetTopic(), a.GetPartitions()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", m.GetMemberId(), m.GetInstanceId(), m.GetMemberEpoch(), strings.Join(m.GetTopics(), ","), strings.Join(parts, " "))
	}
	fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tCOMMITTED\tEND\tLAG")
	for _, o := range d.GetOffsets() {
		// -1: an assigned partition with nothing committed, or an end not
		// known; "-" as Kafka's tool shows them.
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", o.GetTopic(), o.GetPartition(), known(o.GetOffset()), known(o.GetHighWatermark()), known(o.GetLag()))
	}
	return tw.Flush()
}

// known formats an offset or a lag, "-" for -1 (not known).
func known(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

// groupConsume consumes as a member of a group through the gateway's Consume
// stream, printing records and committing what it printed after each batch.
// It stops at --max, after --idle with no records, or on Ctrl-C; then it
// commits, and leaves the group by ending the stream.
func groupConsume(ctx context.Context, conn grpc.ClientConnInterface, sub *skeinv1.JoinGroupRequest, out *printer, errw io.Writer, idle time.Duration) error {
	// The stream outlives ctx (Ctrl-C) long enough to commit and leave.
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	stream, err := skeinv1.NewGroupServiceClient(conn).Consume(sctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Subscribe{Subscribe: sub}}); err != nil {
		return err
	}
	type msg struct {
		resp *skeinv1.ConsumeResponse
		err  error
	}
	recv := make(chan msg)
	go func() {
		for {
			resp, err := stream.Recv()
			select {
			case recv <- msg{resp, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	type tp struct {
		topic     string
		partition int32
	}
	next := map[tp]int64{}      // the offset after the last printed record
	committed := map[tp]int64{} // what was sent for commit
	pending := 0                // commits sent and not yet answered
	commit := func() error {
		var offs []*skeinv1.TopicPartitionOffset
		for p, o := range next {
			if c, ok := committed[p]; !ok || c != o {
				offs = append(offs, &skeinv1.TopicPartitionOffset{Topic: p.topic, Partition: p.partition, Offset: o})
				committed[p] = o
			}
		}
		if len(offs) == 0 {
			return nil
		}
		pending++
		return stream.Send(&skeinv1.ConsumeRequest{Kind: &skeinv1.ConsumeRequest_Commit{Commit: &skeinv1.CommitOffsetsRequest{Group: sub.GetGroup(), Offsets: offs}}})
	}
	// answered takes a commit's answer: a refused partition is forgotten
	// as sent, so that the next commit sends it again (a position told
	// once, with no record after it, would otherwise stay uncommitted).
	answered := func(c *skeinv1.CommitOffsetsResponse) error {
		pending--
		for _, r := range c.GetResults() {
			if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
				delete(committed, tp{r.GetTopic(), r.GetPartition()})
			}
		}
		return commitErr(c)
	}
	finish := func() error {
		var refusal error
		for attempt := range 3 {
			if attempt > 0 {
				time.Sleep(500 * time.Millisecond) // a coordinator that moved, say
			}
			if err := commit(); err != nil {
				return err
			}
			refusal = nil
			deadline := time.After(10 * time.Second)
			for pending > 0 {
				select {
				case m := <-recv:
					if m.err != nil {
						return m.err
					}
					if c := m.resp.GetCommitted(); c != nil {
						if err := answered(c); err != nil {
							refusal = err
						}
					}
				case <-deadline:
					return errors.New("the gateway did not answer the last commit within 10 s")
				}
			}
			if refusal == nil {
				break
			}
		}
		if refusal != nil {
			return refusal
		}
		return stream.CloseSend()
	}
	var idleC <-chan time.Time
	resetIdle := func() {
		if idle > 0 {
			idleC = time.After(idle)
		}
	}
	resetIdle()
	for {
		select {
		case <-ctx.Done():
			// Interrupted: the commit of what was printed and the leave
			// first, then the interrupt's exit status.
			if err := finish(); err != nil {
				return err
			}
			return ctx.Err()
		case <-idleC:
			return finish()
		case m := <-recv:
			if m.err != nil {
				return m.err
			}
			switch {
			case m.resp.GetCommitted() != nil:
				if err := answered(m.resp.GetCommitted()); err != nil {
					fmt.Fprintln(errw, "skein: commit:", err)
				}
			case m.resp.GetRecords() != nil:
				recs := m.resp.GetRecords().GetRecords()
				if len(recs) > 0 {
					resetIdle()
				}
				for _, r := range recs {
					done, err := out.print(r)
					if err != nil {
						return err
					}
					k := tp{r.GetTopic(), r.GetPartition()}
					if c, ok := committed[k]; ok && r.GetOffset() < c {
						// Below what was committed: the partition went
						// back (its topic deleted and made again, its
						// position reset), and that commit may have gone
						// with it. Commit again, if at the same offset.
						delete(committed, k)
					}
					next[k] = r.GetOffset() + 1
					if done {
						return finish()
					}
				}
				// Every record sent was printed: the member stands at the
				// positions, also where none came (a partition started at
				// its reset offset), and commits them, as a Kafka console
				// consumer does; a group at latest would otherwise skip
				// what is written between two runs.
				for _, p := range m.resp.GetRecords().GetPositions() {
					if p.GetOffset() >= 0 {
						next[tp{p.GetTopic(), p.GetPartition()}] = p.GetOffset()
					}
				}
				if err := commit(); err != nil {
					return err
				}
			}
		}
	}
}

// commitErr answers the first refused partition of a commit answer.
func commitErr(c *skeinv1.CommitOffsetsResponse) error {
	for _, r := range c.GetResults() {
		if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
			return fmt.Errorf("%s:%d: %s: %s", r.GetTopic(), r.GetPartition(), r.GetErrorCode(), r.GetMessage())
		}
	}
	return nil
}
