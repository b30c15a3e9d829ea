package txn

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// No producer id or epoch: a request without an expected pair, a record
// without a previous or next producer id, a transactional id never written.
const (
	NoProducerID int64 = -1
	NoEpoch      int16 = -1
)

// MaxHandedEpoch is the highest epoch a producer is ever given. An epoch at
// or above it is exhausted (Kafka's isEpochExhausted): the next bump a
// producer asks for gives it a new producer id at epoch 0. Only markers (an
// EndTxn, a fence or a timeout abort from MaxHandedEpoch) are written at
// math.MaxInt16, so they fence every epoch the producer id was ever given.
const MaxHandedEpoch int16 = math.MaxInt16 - 1

// maxString is the longest string the record format holds (an int16
// length, Kafka's STRING).
const maxString = math.MaxInt16

// State is a transaction state; the names are the ones DescribeTransactions
// shows.
type State string

// The states, as Kafka's TransactionState.
const (
	Empty          State = "EMPTY"           // no transaction open; the producer has an id and epoch
	Ongoing        State = "ONGOING"         // a transaction is open: partitions or groups were added
	PrepareCommit  State = "PREPARE_COMMIT"  // commit decided and logged; markers are being written
	PrepareAbort   State = "PREPARE_ABORT"   // abort decided and logged; markers are being written
	CompleteCommit State = "COMPLETE_COMMIT" // markers written; the producer may start the next transaction
	CompleteAbort  State = "COMPLETE_ABORT"  // markers written; the producer may start the next transaction
	Dead           State = "DEAD"            // the transactional id expired; written as a tombstone
	// PrepareEpochFence is InitProducerId fencing the producer of an open
	// transaction. This package logs that fence as PREPARE_ABORT at the
	// bumped epoch and shows PREPARE_EPOCH_FENCE only as the pending state;
	// a record in this state, read from the log, continues to the abort
	// (Resume).
	PrepareEpochFence State = "PREPARE_EPOCH_FENCE"
)

// states in the order of their number in the record format (Kafka's).
var states = []State{Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence}

func (s State) preparing() bool { return s == PrepareCommit || s == PrepareAbort }
func (s State) complete() bool  { return s == CompleteCommit || s == CompleteAbort }

// decision answers whether a PREPARE_* or COMPLETE_* state commits (true)
// or aborts; ok is false for other states.
func (s State) decision() (commit, ok bool) {
	switch s {
	case PrepareCommit, CompleteCommit:
		return true, true
	case PrepareAbort, CompleteAbort:
		return false, true
	}
	return false, false
}

// TopicPartition is one partition in a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (p TopicPartition) compare(o TopicPartition) int {
	if c := strings.Compare(p.Topic, o.Topic); c != 0 {
		return c
	}
	return int(p.Partition) - int(o.Partition)
}

// FormatPartitions writes partitions as "t:0,1;u:2" ("-" for none), in the
// order given.
func FormatPartitions(ps []TopicPartition) string {
	if len(ps) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, p := range ps {
		switch {
		case i == 0:
		case ps[i-1].Topic == p.Topic:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(int(p.Partition)))
			continue
		default:
			b.WriteByte(';')
		}
		b.WriteString(p.Topic)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(int(p.Partition)))
	}
	return b.String()
}

// sortedPartitions answers ps sorted by topic and partition, without
// duplicates; nil when empty.
func sortedPartitions(ps []TopicPartition) []TopicPartition {
	if len(ps) == 0 {
		return nil
	}
	out := slices.Clone(ps)
	slices.SortFunc(out, TopicPartition.compare)
	return slices.Compact(out)
}

func sortedStrings(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// Config holds the coordinator's knobs; a zero field takes DefaultConfig's.
type Config struct {
	// MaxTimeout is the longest transaction timeout a producer may ask for
	// (Kafka's transaction.max.timeout.ms).
	MaxTimeout time.Duration
	// IDExpiration: a transactional id with no transaction open whose state
	// did not change for this long is deleted by Tick (Kafka's
	// transactional.id.expiration.ms).
	IDExpiration time.Duration
}

// DefaultConfig answers Kafka's defaults: 15 minutes and 7 days.
func DefaultConfig() Config {
	return Config{MaxTimeout: 15 * time.Minute, IDExpiration: 7 * 24 * time.Hour}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = d.MaxTimeout
	}
	if c.IDExpiration <= 0 {
		c.IDExpiration = d.IDExpiration
	}
	return c
}

// Record is the durable state of one transactional id: the value of its
// __transaction_state record (Encode). Times are whole milliseconds in UTC
// and the zero time stands for none; Partitions and Groups are sorted,
// without duplicates, nil when empty.
type Record struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	// PrevProducerID and PrevProducerEpoch are the pair a producer named
	// when it asked for the bump that made the current one (an EndTxn, or
	// an InitProducerId with an expected pair), or NoProducerID/NoEpoch. A
	// request carrying it again is that producer retrying after the answer
	// was lost. Entering ONGOING clears it: the producer has shown it holds
	// the new pair.
	PrevProducerID    int64
	PrevProducerEpoch int16
	// NextProducerID is set only in PREPARE_* after an EndTxn at an
	// exhausted epoch: the producer id the producer goes on with, at epoch
	// 0, once the transaction completes. NoProducerID otherwise.
	NextProducerID int64
	Timeout        time.Duration
	State          State
	Partitions     []TopicPartition
	Groups         []string
	// StartTime is when the open (or last) transaction began; zero in EMPTY.
	StartTime  time.Time
	UpdateTime time.Time
}

// Equal reports whether two records are the same state.
func (r Record) Equal(o Record) bool {
	return r.TransactionalID == o.TransactionalID && r.ProducerID == o.ProducerID && r.ProducerEpoch == o.ProducerEpoch &&
		r.PrevProducerID == o.PrevProducerID && r.PrevProducerEpoch == o.PrevProducerEpoch &&
		r.NextProducerID == o.NextProducerID && r.Timeout == o.Timeout && r.State == o.State &&
		slices.Equal(r.Partitions, o.Partitions) && slices.Equal(r.Groups, o.Groups) &&
		r.StartTime.Equal(o.StartTime) && r.UpdateTime.Equal(o.UpdateTime)
}

// clone answers a deep copy.
func (r Record) clone() Record {
	r.Partitions = slices.Clone(r.Partitions)
	r.Groups = slices.Clone(r.Groups)
	return r
}

// producer answers the pair the producer holds (or is being given) in this
// state: the next producer id at epoch 0 while an epoch-exhausting EndTxn
// completes, else the producer id and epoch.
func (r Record) producer() pair {
	if r.NextProducerID != NoProducerID {
		return pair{r.NextProducerID, 0}
	}
	return pair{r.ProducerID, r.ProducerEpoch}
}

func (r Record) prev() pair { return pair{r.PrevProducerID, r.PrevProducerEpoch} }

func (r Record) hasPrev() bool { return r.PrevProducerID != NoProducerID }

type pair struct {
	id    int64
	epoch int16
}

var noPair = pair{NoProducerID, NoEpoch}

// InitRequest is an InitProducerId for a transactional id.
type InitRequest struct {
	// Timeout is the transaction timeout, in whole milliseconds, within
	// (0, Config.MaxTimeout].
	Timeout time.Duration
	// ExpectedProducerID and ExpectedEpoch: NoProducerID and NoEpoch for a
	// producer starting afresh; the pair it holds when it recovers with it
	// (KIP-360).
	ExpectedProducerID int64
	ExpectedEpoch      int16
}

// Allocator hands out a producer id no one has used (the shell takes them
// from a block the controller allocated). Events call it at most once, and
// only when they need a new id: a new transactional id, or an exhausted
// epoch. Its error is returned as is.
type Allocator func() (int64, error)

// Reply is what InitProducerId and EndTxn answer the producer, once the
// write of Effects.Write (if any) is acknowledged.
type Reply struct {
	ProducerID    int64
	ProducerEpoch int16
	// Err, when not nil, is the answer instead of the pair: InitProducerId
	// fencing an open transaction answers CONCURRENT_TRANSACTIONS (retry
	// once the abort is complete).
	Err error
}

// Markers are the commit or abort markers a PREPARE_* state needs written:
// a control batch at ProducerID/ProducerEpoch on every partition, and the
// same on the __consumer_offsets partition of every group (which commits or
// discards the group's transactional offsets).
type Markers struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	Partitions      []TopicPartition
	Groups          []string
}

// Effects is what the shell must do after an event.
type Effects struct {
	// Write, when not nil, is the new state: write it to
	// __transaction_state (acks=all), then call Complete(*Write), or Fail()
	// if the write failed. Until then the transition is pending.
	Write *Record
	// Markers, when not nil, are due: write them, then call MarkersWritten.
	Markers *Markers
	// Deleted: the transactional id is gone (its tombstone is written);
	// drop the Txn.
	Deleted bool
}

// Description is DescribeTransactions' view of a transactional id.
type Description struct {
	TransactionalID string
	State           State
	// Pending is the state a pending transition leads to ("" when none);
	// PREPARE_EPOCH_FENCE while InitProducerId's fence is being written.
	Pending       State
	ProducerID    int64
	ProducerEpoch int16
	Timeout       time.Duration
	StartTime     time.Time
	UpdateTime    time.Time
	Partitions    []TopicPartition
	Groups        []string
	// MarkersDue: the state is PREPARE_* and its markers are not written yet.
	MarkersDue bool
}

// ParseState answers the state a filter names: its name as State spells it
// ("PREPARE_COMMIT") or as Kafka's tools do ("PrepareCommit"), in any case;
// false for a name no state has. PREPARE_EPOCH_FENCE, never a logged state,
// is not one.
func ParseState(name string) (State, bool) {
	norm := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "_", "")) }
	n := norm(name)
	for _, s := range states {
		if s != PrepareEpochFence && n != "" && norm(string(s)) == n {
			return s, true
		}
	}
	return "", false
}
