package membership

import (
	"flag"
	"fmt"
)

// TimingFlags registers on fs the failure-detector settings every gossiping
// process takes, with FastTimings' values as defaults:
// --gossip-probe-interval, --gossip-probe-timeout and
// --gossip-suspicion-mult. Every member of a cluster should run with the
// same values. The function it returns, called after parsing, answers
// FastTimings with them applied (news is gossiped once per probe
// interval, so a quieter detector also wakes an idle process less often for
// gossip), or an error naming a value the failure detector cannot work
// with.
func TimingFlags(fs *flag.FlagSet) func() (Timings, error) {
	d := FastTimings()
	probe := fs.Duration("gossip-probe-interval", d.ProbeInterval,
		"gossip failure detector: each member probes one other this often; the suspicion scales with it, so a longer interval detects a dead member later and wakes an idle process less often")
	timeout := fs.Duration("gossip-probe-timeout", d.ProbeTimeout,
		"how long a probe waits for its ack before other members are asked to probe too; shorter than --gossip-probe-interval")
	mult := fs.Int("gossip-suspicion-mult", d.SuspicionMult,
		"a suspected member is declared dead after about this many probe intervals, unless it refutes the suspicion")
	return func() (Timings, error) {
		t := d
		t.ProbeInterval, t.ProbeTimeout, t.SuspicionMult = *probe, *timeout, *mult
		t.GossipInterval = t.ProbeInterval
		return t, t.Check()
	}
}

// Check refuses failure-detector settings memberlist cannot work with.
func (t Timings) Check() error {
	switch {
	case t.ProbeInterval <= 0:
		return fmt.Errorf("--gossip-probe-interval %v: want a positive duration", t.ProbeInterval)
	case t.ProbeTimeout <= 0 || t.ProbeTimeout >= t.ProbeInterval:
		return fmt.Errorf("--gossip-probe-timeout %v: want a positive duration shorter than --gossip-probe-interval (%v)", t.ProbeTimeout, t.ProbeInterval)
	case t.SuspicionMult < 1:
		return fmt.Errorf("--gossip-suspicion-mult %d: want 1 or more", t.SuspicionMult)
	}
	return nil
}
