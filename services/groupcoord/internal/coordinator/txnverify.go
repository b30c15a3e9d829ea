package coordinator

import (
	"context"
	"slices"

	txnv1 "skein/gen/skein/txn/v1"
	"skein/libs/client"
	"skein/libs/errs"
)

// TxnVerifier asks the transaction coordinators whether a transaction is
// open. A group coordinator that holds nothing of a producer (a group it
// has just loaded, say) cannot tell from its own state a late
// TxnOffsetCommit of a transaction that ended under the group's previous
// coordinator, whose completion it never saw, from the first of an open
// one: written, such an offset would stay pending with nothing left to
// end it, and read_committed members would never start its partition.
type TxnVerifier interface {
	// VerifyOpen answers nil when transactionalID's transaction is open
	// under producer id pid at epoch and has added group (AddOffsetsToTxn);
	// PRODUCER_FENCED when another producer id or a newer epoch holds the
	// id (every end of a transaction bumps the epoch, so that is what a
	// late commit of an ended one meets); INVALID_TXN_STATE for an id with
	// no state; COORDINATOR_LOAD_IN_PROGRESS, to be retried, when the
	// answer shows the transaction not open yet (an older epoch, the group
	// not added): the transaction coordinator that answered may not have
	// caught up with the one the producer spoke to. Other errors (no
	// transaction coordinator reachable) are retriable too.
	VerifyOpen(ctx context.Context, transactionalID string, pid int64, epoch int16, group string) error
}

// ClientTxns is a TxnVerifier that describes the transaction through a
// client.
type ClientTxns struct{ T *client.Transactions }

// VerifyOpen implements TxnVerifier.
func (x ClientTxns) VerifyOpen(ctx context.Context, transactionalID string, pid int64, epoch int16, group string) error {
	d, err := x.T.Describe(ctx, transactionalID)
	if errs.Of(err) == errs.TransactionalIDNotFound {
		return errs.Errorf(errs.InvalidTxnState, "transactional id %q has no transaction open", transactionalID)
	}
	if err != nil {
		return err
	}
	return openIn(d, pid, epoch, group)
}

// openIn decides VerifyOpen from the transaction's description.
func openIn(d *txnv1.TransactionDescription, pid int64, epoch int16, group string) error {
	id := d.GetTransactionalId()
	switch {
	case d.GetProducerId() != pid || d.GetProducerEpoch() > int32(epoch):
		return errs.Errorf(errs.ProducerFenced, "transactional id %q is held by producer %d at epoch %d, not %d at %d: this transaction has ended",
			id, d.GetProducerId(), d.GetProducerEpoch(), pid, epoch)
	case d.GetProducerEpoch() < int32(epoch):
		return errs.Errorf(errs.CoordinatorLoadInProgress, "transactional id %q: its transaction coordinator shows producer %d at epoch %d, not %d yet; retry", id, pid, d.GetProducerEpoch(), epoch)
	case d.GetState() != "ONGOING":
		return errs.Errorf(errs.CoordinatorLoadInProgress, "transactional id %q: its transaction coordinator shows no transaction open (%s); retry, after AddOffsetsToTxn", id, d.GetState())
	case !slices.Contains(d.GetGroups(), group):
		return errs.Errorf(errs.CoordinatorLoadInProgress, "transactional id %q: its transaction coordinator shows group %q not added to the transaction; retry, after AddOffsetsToTxn", id, group)
	}
	return nil
}
