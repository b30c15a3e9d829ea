package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Options tune Check. The zero value is the default.
type Options struct {
	// MaxExamples is how many examples of each kind Result.String prints
	// (default 3).
	MaxExamples int
	// LinearizabilityMaxOps bounds the operations (sends and polled
	// records) of one partition that porcupine is asked about: a larger
	// partition is Skipped. 0 is 300; negative turns the check off.
	LinearizabilityMaxOps int
	// LinearizabilityTimeout bounds porcupine on one partition (default
	// 5 s); past it the verdict is TimedOut.
	LinearizabilityTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxExamples == 0 {
		o.MaxExamples = 3
	}
	if o.LinearizabilityMaxOps == 0 {
		o.LinearizabilityMaxOps = 300
	}
	if o.LinearizabilityTimeout == 0 {
		o.LinearizabilityTimeout = 5 * time.Second
	}
	return o
}

// Check audits a history against the final read of its topic and counts
// every anomaly doc.go defines. It does no I/O and reads no clock (the
// linearizability check is bounded by Options.LinearizabilityTimeout).
func Check(h History, final Log, opts Options) *Result {
	opts = opts.withDefaults()
	res := &Result{MaxExamples: opts.MaxExamples, Polls: len(h.Polls), Commits: len(h.Commits)}
	for _, s := range h.Sends {
		switch s.Outcome {
		case Written:
			res.Acknowledged++
		case NotWritten:
			res.NotWritten++
		default:
			res.Unknown++
		}
	}
	for _, p := range h.Polls {
		res.Polled += len(p.Records)
	}
	if final == nil {
		final = Log{}
	}
	c := &checker{h: h, final: final, res: res, opts: opts}
	c.index()
	c.lostWrites()
	c.failedWritten()
	c.offsets()
	c.sendOrder()
	c.unseen()
	c.pollRuns()
	c.commits()
	c.transactions()
	if opts.LinearizabilityMaxOps > 0 {
		c.linearizability()
	}
	res.sortAnomalies()
	return res
}

type checker struct {
	h     History
	final Log
	res   *Result
	opts  Options

	partitions []int32             // every partition the history or the log names
	logOffsets map[int32][]int64   // the final log's offsets, sorted
	logValues  map[string][]Record // value → where the final log holds it
	polled     map[string]bool     // every value a poll returned
	txnOf      map[string]string   // value → transaction id
	txns       map[string]Txn      // id → its end (the last one recorded)
	sendsOf    map[string][]Send   // value → its sends
}

func (c *checker) index() {
	ps := map[int32]bool{}
	c.logOffsets = map[int32][]int64{}
	c.logValues = map[string][]Record{}
	for p, log := range c.final {
		ps[p] = true
		offs := slices.Sorted(maps.Keys(log))
		c.logOffsets[p] = offs
		for _, o := range offs {
			c.logValues[log[o]] = append(c.logValues[log[o]], Record{p, o, log[o]})
		}
	}
	c.txnOf, c.sendsOf = map[string]string{}, map[string][]Send{}
	for _, s := range c.h.Sends {
		ps[s.Partition] = true
		c.sendsOf[s.Value] = append(c.sendsOf[s.Value], s)
		if s.Txn != "" {
			c.txnOf[s.Value] = s.Txn
		}
	}
	c.polled = map[string]bool{}
	for _, p := range c.h.Polls {
		for _, r := range p.Records {
			ps[r.Partition] = true
			c.polled[r.Value] = true
		}
	}
	c.txns = map[string]Txn{}
	for _, t := range c.h.Txns {
		c.txns[t.ID] = t
	}
	c.partitions = slices.Sorted(maps.Keys(ps))
}

// lostWrites: an acknowledged record that the final log does not hold at
// its offset.
func (c *checker) lostWrites() {
	for _, s := range c.h.Sends {
		if s.Outcome != Written {
			continue
		}
		got, ok := c.final[s.Partition][s.Offset]
		if ok && got == s.Value {
			continue
		}
		d := fmt.Sprintf("acknowledged to %s; the log has nothing there", s.Producer)
		if ok {
			d = fmt.Sprintf("acknowledged to %s; the log has %q there", s.Producer, got)
		}
		if elsewhere := c.logValues[s.Value]; len(elsewhere) > 0 {
			d += fmt.Sprintf(" (the value is at p%d@%d)", elsewhere[0].Partition, elsewhere[0].Offset)
		}
		c.res.add(Anomaly{LostWrite, s.Partition, s.Offset, s.Value, d})
	}
}

// failedWritten: a send answered NotWritten whose record is in the log or
// was polled.
func (c *checker) failedWritten() {
	for _, s := range c.h.Sends {
		if s.Outcome != NotWritten {
			continue
		}
		// Another send of the same value may have written it.
		if slices.ContainsFunc(c.sendsOf[s.Value], func(o Send) bool { return o.Outcome != NotWritten }) {
			continue
		}
		if at := c.logValues[s.Value]; len(at) > 0 {
			c.res.add(Anomaly{FailedWritten, at[0].Partition, at[0].Offset, s.Value,
				fmt.Sprintf("answered NOT_WRITTEN to %s (%s), in the final log", s.Producer, s.Err)})
		} else if c.polled[s.Value] {
			c.res.add(Anomaly{FailedWritten, s.Partition, -1, s.Value,
				fmt.Sprintf("answered NOT_WRITTEN to %s (%s), polled", s.Producer, s.Err)})
		}
	}
}

// offsets finds inconsistent offsets (one offset, two values) and
// duplicates (one value, two places), over acknowledgements, polls and the
// final log.
func (c *checker) offsets() {
	type place struct {
		p int32
		o int64
	}
	byOffset := map[place]map[string][]string{} // → value → who reported it
	byValue := map[string]map[place][]string{}
	note := func(p int32, o int64, v, who string) {
		pl := place{p, o}
		if byOffset[pl] == nil {
			byOffset[pl] = map[string][]string{}
		}
		if byValue[v] == nil {
			byValue[v] = map[place][]string{}
		}
		if !slices.Contains(byOffset[pl][v], who) {
			byOffset[pl][v] = append(byOffset[pl][v], who)
			byValue[v][pl] = append(byValue[v][pl], who)
		}
	}
	for p, log := range c.final {
		for o, v := range log {
			note(p, o, v, "log")
		}
	}
	for _, s := range c.h.Sends {
		if s.Outcome == Written {
			note(s.Partition, s.Offset, s.Value, "ack:"+s.Producer)
		}
	}
	for _, p := range c.h.Polls {
		for _, r := range p.Records {
			note(r.Partition, r.Offset, r.Value, "poll:"+p.Consumer)
		}
	}
	for pl, vals := range byOffset {
		if len(vals) < 2 {
			continue
		}
		var parts []string
		for _, v := range slices.Sorted(maps.Keys(vals)) {
			parts = append(parts, fmt.Sprintf("%q (%s)", v, strings.Join(vals[v], ", ")))
		}
		c.res.add(Anomaly{InconsistentOffset, pl.p, pl.o, "", "values " + strings.Join(parts, " and ")})
	}
	for v, places := range byValue {
		if len(places) < 2 {
			continue
		}
		pls := slices.SortedFunc(maps.Keys(places), func(a, b place) int {
			return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.o, b.o))
		})
		var parts []string
		for _, pl := range pls {
			parts = append(parts, fmt.Sprintf("p%d@%d (%s)", pl.p, pl.o, strings.Join(places[pl], ", ")))
		}
		c.res.add(Anomaly{Duplicate, pls[0].p, pls[0].o, v, "at " + strings.Join(parts, " and ")})
	}
}

// sendOrder: per producer and partition, in the order the sends were
// invoked, every acknowledged offset is above the ones before it.
func (c *checker) sendOrder() {
	type key struct {
		producer  string
		partition int32
	}
	byKey := map[key][]Send{}
	for _, s := range c.h.Sends {
		if s.Outcome == Written {
			k := key{s.Producer, s.Partition}
			byKey[k] = append(byKey[k], s)
		}
	}
	for _, sends := range byKey {
		slices.SortStableFunc(sends, func(a, b Send) int { return a.Invoke.Compare(b.Invoke) })
		for i := 1; i < len(sends); i++ {
			prev, s := sends[i-1], sends[i]
			if s.Offset <= prev.Offset {
				c.res.add(Anomaly{NonmonotonicSend, s.Partition, s.Offset, s.Value,
					fmt.Sprintf("%s sent it after %q, acknowledged at %d", s.Producer, prev.Value, prev.Offset)})
			}
		}
	}
}

// readerOf names who must have seen every record: the group, or a
// standalone consumer by its name.
func readerOf(p Poll) string {
	if p.Group != "" {
		return "group " + p.Group
	}
	return "consumer " + p.Consumer
}

// unseen: every reader (a group, or a standalone consumer) reached some
// offset of each partition it polled — the highest offset it polled, plus
// one. Every acknowledged record below it that the final log still holds
// at its offset (else it is a lost write) and that is readable (not in a
// transaction that did not commit) must have been polled by the reader.
func (c *checker) unseen() {
	reach := map[string]map[int32]int64{}
	seen := map[string]map[string]bool{}
	for _, p := range c.h.Polls {
		r := readerOf(p)
		if reach[r] == nil {
			reach[r], seen[r] = map[int32]int64{}, map[string]bool{}
		}
		for _, rec := range p.Records {
			reach[r][rec.Partition] = max(reach[r][rec.Partition], rec.Offset+1)
			seen[r][rec.Value] = true
		}
	}
	for _, r := range slices.Sorted(maps.Keys(reach)) {
		for _, s := range c.h.Sends {
			if s.Outcome != Written || s.Offset >= reach[r][s.Partition] || seen[r][s.Value] {
				continue
			}
			if got, ok := c.final[s.Partition][s.Offset]; !ok || got != s.Value {
				continue
			}
			if t := c.txnOf[s.Value]; t != "" && c.txns[t].Outcome != TxnCommitted {
				continue
			}
			c.res.add(Anomaly{Unseen, s.Partition, s.Offset, s.Value,
				fmt.Sprintf("acknowledged to %s; %s read p%d up to %d and never saw it", s.Producer, r, s.Partition, reach[r][s.Partition])})
		}
	}
}

// pollRuns: a member's polls of one partition form a run while each poll's
// assignment holds the partition and the member epoch stays the same; in a
// run, the offsets polled rise (else nonmonotonic poll) and every offset
// between two consecutive ones is empty in the final log (else poll skip).
func (c *checker) pollRuns() {
	byConsumer := map[string][]Poll{}
	for _, p := range c.h.Polls {
		k := p.Group + "\x00" + p.Consumer
		byConsumer[k] = append(byConsumer[k], p)
	}
	type run struct {
		epoch int32
		last  int64 // -1: nothing polled yet in this run
	}
	for _, polls := range byConsumer {
		slices.SortStableFunc(polls, func(a, b Poll) int { return a.Invoke.Compare(b.Invoke) })
		runs := map[int32]*run{}
		for _, p := range polls {
			if p.Err != "" {
				continue
			}
			if p.Group != "" {
				for part, r := range runs {
					if !slices.Contains(p.Assignment, part) || r.epoch != p.MemberEpoch {
						delete(runs, part)
					}
				}
			}
			for _, rec := range p.Records {
				r := runs[rec.Partition]
				if r == nil {
					r = &run{epoch: p.MemberEpoch, last: -1}
					runs[rec.Partition] = r
				}
				who := p.Consumer
				if p.Group != "" {
					who = fmt.Sprintf("member %s of %s at epoch %d", p.Consumer, p.Group, p.MemberEpoch)
				}
				switch {
				case r.last < 0:
				case rec.Offset <= r.last:
					c.res.add(Anomaly{NonmonotonicPoll, rec.Partition, rec.Offset, rec.Value,
						fmt.Sprintf("%s polled it after offset %d", who, r.last)})
				case rec.Offset > r.last+1:
					if n := c.logCount(rec.Partition, r.last+1, rec.Offset); n > 0 {
						c.res.add(Anomaly{PollSkip, rec.Partition, r.last + 1, "",
							fmt.Sprintf("%s polled %d then %d; the log holds %d between", who, r.last, rec.Offset, n)})
					}
				}
				r.last = rec.Offset
			}
		}
	}
}

// logCount answers how many records the final log holds at [from, to).
func (c *checker) logCount(p int32, from, to int64) int {
	offs := c.logOffsets[p]
	i, _ := slices.BinarySearch(offs, from)
	j, _ := slices.BinarySearch(offs, to)
	return j - i
}

// commits: per group and partition, a successful commit that began after
// another successful one had completed commits an offset no lower.
func (c *checker) commits() {
	type key struct {
		group     string
		partition int32
	}
	byKey := map[key][]Commit{}
	for _, cm := range c.h.Commits {
		if cm.OK {
			k := key{cm.Group, cm.Partition}
			byKey[k] = append(byKey[k], cm)
		}
	}
	for _, cms := range byKey {
		byComplete := slices.Clone(cms)
		slices.SortStableFunc(byComplete, func(a, b Commit) int { return a.Complete.Compare(b.Complete) })
		slices.SortStableFunc(cms, func(a, b Commit) int { return a.Invoke.Compare(b.Invoke) })
		var high *Commit // the highest commit completed before the current one began
		j := 0
		for _, cm := range cms {
			for ; j < len(byComplete) && byComplete[j].Complete.Before(cm.Invoke); j++ {
				if high == nil || byComplete[j].Offset > high.Offset {
					high = &byComplete[j]
				}
			}
			if high != nil && cm.Offset < high.Offset {
				c.res.add(Anomaly{CommitBackwards, cm.Partition, cm.Offset, "",
					fmt.Sprintf("group %s: %s (epoch %d) committed %d after %s (epoch %d) had committed %d",
						cm.Group, cm.Member, cm.MemberEpoch, cm.Offset, high.Member, high.MemberEpoch, high.Offset)})
			}
		}
	}
}

// transactions: a read_committed poll returns no record of a transaction
// that aborted (aborted read), nor of one that had not committed yet — no
// end recorded, or the poll completed before the commit was sent
// (uncommitted read).
func (c *checker) transactions() {
	if len(c.txnOf) == 0 {
		return
	}
	for _, p := range c.h.Polls {
		if !p.ReadCommitted {
			continue
		}
		for _, rec := range p.Records {
			id := c.txnOf[rec.Value]
			if id == "" {
				continue
			}
			t, ended := c.txns[id]
			switch {
			case ended && t.Outcome == TxnAborted:
				c.res.add(Anomaly{AbortedRead, rec.Partition, rec.Offset, rec.Value,
					fmt.Sprintf("%s read it; transaction %s aborted", p.Consumer, id)})
			case !ended:
				c.res.add(Anomaly{UncommittedRead, rec.Partition, rec.Offset, rec.Value,
					fmt.Sprintf("%s read it; transaction %s never ended", p.Consumer, id)})
			case p.Complete.Before(t.Invoke):
				c.res.add(Anomaly{UncommittedRead, rec.Partition, rec.Offset, rec.Value,
					fmt.Sprintf("%s read it before transaction %s was committed", p.Consumer, id)})
			}
		}
	}
}
