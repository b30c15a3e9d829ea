package history

import (
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability model: a partition is an append-only log. A send
// appends its value and returns the offset it got, which must be above
// every offset before it (offsets need not be dense: control records and
// aborted batches take offsets too). A read of offset o returns the value
// there, which must already be in the log.

type logEntry struct {
	offset int64
	value  string
}

type linInput struct {
	send   bool
	value  string // send
	offset int64  // read
}

type linOutput struct {
	offset int64  // send
	value  string // read
}

var logModel = porcupine.Model{
	Init: func() any { return []logEntry(nil) },
	Step: func(state, input, output any) (bool, any) {
		log, in, out := state.([]logEntry), input.(linInput), output.(linOutput)
		if in.send {
			if len(log) > 0 && out.offset <= log[len(log)-1].offset {
				return false, log
			}
			return true, append(slices.Clip(log), logEntry{out.offset, in.value})
		}
		i, ok := slices.BinarySearchFunc(log, in.offset, func(e logEntry, o int64) int {
			switch {
			case e.offset < o:
				return -1
			case e.offset > o:
				return 1
			}
			return 0
		})
		return ok && log[i].value == out.value, log
	},
	Equal: func(a, b any) bool { return slices.Equal(a.([]logEntry), b.([]logEntry)) },
}

// linearizability checks each partition's sends and polled records with
// porcupine. Acknowledged sends return their offset; a send of unknown
// outcome whose value was polled or is in the final log of the partition
// returns that offset and may take effect until the end of the history
// (one never seen is left out: it may never have happened); sends that were
// not written are left out. Each polled record is a read of its offset
// over its poll's interval.
func (c *checker) linearizability() {
	var base time.Time
	first := true
	note := func(t time.Time) {
		if !t.IsZero() && (first || t.Before(base)) {
			base, first = t, false
		}
	}
	for _, s := range c.h.Sends {
		note(s.Invoke)
	}
	for _, p := range c.h.Polls {
		note(p.Invoke)
	}
	stamp := func(t time.Time) int64 {
		if t.IsZero() || first {
			return 0
		}
		return int64(t.Sub(base))
	}
	type interval struct{ call, ret int64 }
	span := func(invoke, complete time.Time) interval {
		iv := interval{stamp(invoke), stamp(complete)}
		iv.ret = max(iv.ret, iv.call)
		return iv
	}
	// Where each value was observed, by partition.
	observed := map[int32]map[string]int64{}
	see := func(p int32, o int64, v string) {
		if observed[p] == nil {
			observed[p] = map[string]int64{}
		}
		if _, ok := observed[p][v]; !ok {
			observed[p][v] = o
		}
	}
	for _, p := range c.h.Polls {
		for _, r := range p.Records {
			see(r.Partition, r.Offset, r.Value)
		}
	}
	for p, log := range c.final {
		for _, o := range c.logOffsets[p] {
			see(p, o, log[o])
		}
	}

	type pending struct {
		op      porcupine.Operation
		openEnd bool
	}
	ops := map[int32][]pending{}
	end := int64(0)
	// A value sent more than once (a retry after an unknown outcome) is one
	// append: an acknowledged send of it stands for all, or else the first
	// unknown one invoked.
	type pv struct {
		p int32
		v string
	}
	acked, unknown := map[pv]bool{}, map[pv]int{} // → index in Sends
	for i, s := range c.h.Sends {
		iv := span(s.Invoke, s.Complete)
		end = max(end, iv.ret)
		k := pv{s.Partition, s.Value}
		switch s.Outcome {
		case Written:
			acked[k] = true
			ops[s.Partition] = append(ops[s.Partition], pending{op: porcupine.Operation{
				Input: linInput{send: true, value: s.Value}, Call: iv.call, Output: linOutput{offset: s.Offset}, Return: iv.ret}})
		case Unknown:
			if u, ok := unknown[k]; !ok || s.Invoke.Before(c.h.Sends[u].Invoke) {
				unknown[k] = i
			}
		}
	}
	for i, s := range c.h.Sends { // in recording order, for a stable history
		k := pv{s.Partition, s.Value}
		if u, ok := unknown[k]; !ok || u != i || acked[k] {
			continue
		}
		if o, ok := observed[s.Partition][s.Value]; ok {
			ops[s.Partition] = append(ops[s.Partition], pending{op: porcupine.Operation{
				Input: linInput{send: true, value: s.Value}, Call: stamp(s.Invoke), Output: linOutput{offset: o}}, openEnd: true})
		}
	}
	for _, p := range c.h.Polls {
		iv := span(p.Invoke, p.Complete)
		end = max(end, iv.ret)
		for _, r := range p.Records {
			ops[r.Partition] = append(ops[r.Partition], pending{op: porcupine.Operation{
				Input: linInput{offset: r.Offset}, Call: iv.call, Output: linOutput{value: r.Value}, Return: iv.ret}})
		}
	}
	for _, part := range c.partitions {
		pend := ops[part]
		if len(pend) == 0 {
			continue
		}
		l := Linearizability{Partition: part, Ops: len(pend)}
		if len(pend) > c.opts.LinearizabilityMaxOps {
			l.Verdict = Skipped
			c.res.Linearizability = append(c.res.Linearizability, l)
			continue
		}
		history := make([]porcupine.Operation, len(pend))
		for i, p := range pend {
			history[i] = p.op
			history[i].ClientId = i
			if p.openEnd {
				history[i].Return = end + 1
			}
		}
		switch porcupine.CheckOperationsTimeout(logModel, history, c.opts.LinearizabilityTimeout) {
		case porcupine.Ok:
			l.Verdict = Linearizable
		case porcupine.Illegal:
			l.Verdict = NotLinearizable
			c.res.add(Anomaly{Nonlinearizable, part, -1, "",
				"no order of its sends and reads, within their intervals, fits an append-only log"})
		default:
			l.Verdict = TimedOut
		}
		c.res.Linearizability = append(c.res.Linearizability, l)
	}
}
