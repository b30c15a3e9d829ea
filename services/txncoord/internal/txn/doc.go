// Package txn is the pure core of the transaction coordinator: one Txn is
// the state machine of one transactional id, with the semantics of Kafka's
// TransactionCoordinator and TransactionMetadata (KIP-98), the epoch bump
// of every EndTxn (KIP-890) and the recovery of a producer that lost an
// answer (KIP-360). It does no I/O, starts no goroutine and reads no clock:
// the shell (the gRPC service) feeds it events with the time, performs the
// Effects it answers, and answers the RPCs.
//
// # Two phases
//
// An event that changes the state does not change the Txn: it answers the
// new state as Effects.Write, a Record the shell writes to
// __transaction_state (acks=all), and the transition is pending. When the
// write is acknowledged the shell calls Complete(record), and the state
// takes effect; when it fails, Fail(), and the state stays as it was. The
// reply of the event (InitProducerId's and EndTxn's Reply) goes to the
// producer only after Complete; after Fail the producer gets the write's
// error. So every state is in the log before anyone acts on it, and a new
// coordinator that replays the log never knows less than the old one said.
//
// While a transition is pending, InitProducerId, AddPartitions, AddOffsets,
// EndTxn and MarkersWritten answer CONCURRENT_TRANSACTIONS (before any
// check of the producer id and epoch, as Kafka's coordinator does since
// KIP-890: the pending write may change both), Tick and Resume do nothing,
// and Describe shows the durable state with the pending one beside it.
// Checks of the request alone (an empty transactional id, a timeout out of
// range, an empty partition list) come first.
//
// # Events
//
//   - InitProducerId(req, now, alloc): a new id (or one that expired) gets a
//     new producer id at epoch 0. In EMPTY or COMPLETE_* the epoch is
//     bumped; at an exhausted epoch (MaxHandedEpoch, 32766) the producer
//     gets a new id at epoch 0. In ONGOING the open transaction's producer
//     is fenced: the write is PREPARE_ABORT at the bumped epoch (Describe
//     shows the pending PREPARE_EPOCH_FENCE), and the Reply is
//     CONCURRENT_TRANSACTIONS: the caller retries once the abort is
//     complete and then gets a second bump. In PREPARE_*:
//     CONCURRENT_TRANSACTIONS.
//   - AddPartitions(pid, epoch, partitions, now) and AddOffsets(pid, epoch,
//     group, now): in EMPTY or COMPLETE_* they open a transaction (ONGOING,
//     started now); in ONGOING they add to it, with no write when all is in
//     already; in PREPARE_*: CONCURRENT_TRANSACTIONS (the previous
//     transaction is completing). AddOffsets keeps group ids; the shell maps
//     each to its __consumer_offsets partition.
//   - EndTxn(pid, epoch, commit, now, alloc): ONGOING moves to
//     PREPARE_COMMIT or PREPARE_ABORT at epoch+1, which the Reply gives the
//     producer; markers are written at that epoch, so a delayed produce of
//     the old epoch is refused by the storage node. From an exhausted epoch
//     the markers go out at 32767 under the old id and the Reply gives the
//     producer a new producer id at epoch 0 (Record.NextProducerID), which
//     takes over when the transaction completes.
//   - MarkersWritten(now): the shell wrote the markers of MarkersDue to
//     every partition and group; PREPARE_X moves to COMPLETE_X.
//   - Tick(now): an ONGOING transaction whose start is Timeout ago is
//     aborted (PREPARE_ABORT at a bumped epoch: its producer is fenced); an
//     id in EMPTY or COMPLETE_* unchanged for Config.IDExpiration is deleted
//     (a DEAD write, which the shell writes as a tombstone; Complete then
//     answers Deleted). Call it at NextDeadline().
//   - Resume(now): after Load (or Replay), what the loaded state needs: the
//     markers of a PREPARE_* state, or, for a PREPARE_EPOCH_FENCE record,
//     the write of PREPARE_ABORT at its epoch.
//   - Describe(): DescribeTransactions' view.
//
// # Retries after a lost answer
//
// Record.PrevProducerID/PrevProducerEpoch keep the pair a producer named
// when it asked for the current one. A request that carries it again is
// that producer, which never got the answer:
//
//   - InitProducerId with it as the expected pair, in EMPTY, is answered
//     the current pair again, with no bump and no write; in COMPLETE_* (the
//     producer lost an EndTxn's answer and recovers) it is a valid expected
//     pair and the epoch is bumped.
//   - EndTxn with it, in PREPARE_X or COMPLETE_X of the same decision, is
//     answered the current pair (the bumped epoch, or the new producer id),
//     with no write: the decision is durable, which is all the first answer
//     said. The opposite decision is INVALID_TXN_STATE.
//
// InitProducerId without an expected pair cannot be told from a new
// producer and bumps each time. Entering ONGOING clears the previous pair
// (the producer has shown it holds the new one), as does a fence or
// timeout that no request of that producer asked for.
//
// # Errors (all from skein/libs/errs)
//
//   - INVALID_PRODUCER_ID_MAPPING: the producer id is not the one the
//     transactional id has (or is being given), or the id has none.
//   - PRODUCER_FENCED: an epoch older than the current one (a newer
//     producer, a fence or a timeout abort bumped it), or an InitProducerId
//     whose expected pair is neither the current nor the previous one.
//   - INVALID_PRODUCER_EPOCH: an epoch newer than any the coordinator gave.
//   - CONCURRENT_TRANSACTIONS (retriable): a transition is pending, or the
//     state is PREPARE_* (markers being written).
//   - INVALID_TXN_STATE: EndTxn with nothing in the transaction (EMPTY or
//     COMPLETE_*), the opposite decision of a transaction already decided,
//     MarkersWritten with no markers due.
//   - INVALID_TRANSACTION_TIMEOUT: a timeout outside [1ms, MaxTimeout].
//   - INVALID_REQUEST, INVALID_GROUP_ID: malformed requests.
//   - CORRUPT_MESSAGE: a record that does not decode or that this package
//     would never write (Decode, Load, Encode).
//
// A refused event changes nothing. COORDINATOR_LOAD_IN_PROGRESS and
// NOT_COORDINATOR are the shell's answers while it replays or does not own
// the id; an unknown id in DescribeTransactions is answered by the shell.
//
// # Persistence
//
// Encode and Decode are the __transaction_state record format (see Encode);
// a DEAD state is a tombstone. Replay rebuilds every id of a partition from
// its records read from the start: the latest record of an id wins.
//
// A Txn is not safe for concurrent use: one goroutine (or one mutex) owns it.
package txn
