package client

import (
	"context"
	"fmt"
	"sync"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// TxnMarker is one transaction's end: a COMMIT (Commit) or ABORT control
// record for ProducerID at ProducerEpoch, written by the transaction
// coordinator at CoordinatorEpoch.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}

// WriteTxnMarkers writes m to every partition through its current leader
// and answers once every leader has it replicated to its ISR, retrying what
// failed with a retriable error (a leader change, a timeout) with backoff
// until ctx ends. A partition whose topic is gone, or that already holds a
// newer epoch of the producer (this transaction ended there before), needs
// no marker; any other refusal is answered in the error, with the other
// partitions still written. Writing the same
// marker twice does no harm: the second finds no open transaction.
func (c *Client) WriteTxnMarkers(ctx context.Context, m TxnMarker, partitions []TopicPartition) error {
	if err := c.WaitReady(ctx); err != nil {
		return err
	}
	todo := append([]TopicPartition(nil), partitions...)
	var final []error
	for attempt := 0; len(todo) > 0; attempt++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		failed := map[TopicPartition]error{}
		byBroker := map[*brokerConn][]*storagev1.TopicPartition{}
		for _, tp := range todo {
			bc, _, err := c.leaderOf(tp.Topic, tp.Partition)
			if err != nil {
				failed[tp] = err
				continue
			}
			byBroker[bc] = append(byBroker[bc], &storagev1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		for bc, parts := range byBroker {
			wg.Go(func() {
				// Give up on a leader the metadata replaced (paused, cut off)
				// rather than wait for its answer: a marker written twice is
				// harmless.
				bctx, cancel := c.whileLeading(ctx, bc.id, parts)
				defer cancel()
				resp, err := bc.st.WriteTxnMarkers(bctx, &storagev1.WriteTxnMarkersRequest{Markers: []*storagev1.TxnMarker{{
					ProducerId: m.ProducerID, ProducerEpoch: int32(m.ProducerEpoch), Committed: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch, Partitions: parts,
				}}})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					err = rpcerr.FromStatus(err)
					if bctx.Err() != nil && ctx.Err() == nil {
						err = errs.Errorf(errs.NotLeaderOrFollower, "broker %d no longer leads every partition of the request", bc.id)
					}
					for _, p := range parts {
						failed[TopicPartition{p.GetTopic(), p.GetPartition()}] = err
					}
					return
				}
				for _, mr := range resp.GetMarkers() {
					for _, r := range mr.GetPartitions() {
						if code := r.GetErrorCode(); code != skeinv1.ErrorCode_NONE {
							failed[TopicPartition{r.GetTopic(), r.GetPartition()}] = errs.Errorf(errs.ForCode(errs.Code(code)), "%s", r.GetErrorMessage())
						}
					}
				}
			})
		}
		wg.Wait()
		todo = todo[:0]
		var lastErr error
		for tp, err := range failed {
			switch {
			case errs.Of(err) == errs.UnknownTopicOrPartition && c.Metadata().PartitionCount(tp.Topic) <= tp.Partition:
				// The topic was deleted (or never had the partition): the
				// transaction's records there are gone with it, as in Kafka.
			case errs.IsRetriable(err) || errs.Of(err) == errs.UnknownTopicOrPartition:
				todo, lastErr = append(todo, tp), err
			case errs.Of(err) == errs.InvalidProducerEpoch:
				// A newer epoch of this producer is already in the partition:
				// this transaction ended there before.
			default:
				final = append(final, fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, err))
			}
		}
		if len(todo) == 0 {
			break
		}
		if ctx.Err() != nil {
			return errs.Errorf(errs.RequestTimedOut, "transaction markers not written to %v: %v", todo, lastErr)
		}
		if c.waitRetry(ctx, attempt, lastErr) != nil {
			return errs.Errorf(errs.RequestTimedOut, "transaction markers not written to %v: %v", todo, lastErr)
		}
	}
	if len(final) > 0 {
		return errs.Errorf(errs.Of(final[0]), "transaction markers refused: %v", final)
	}
	return nil
}

// whileLeading answers a context that ends with ctx, or as soon as the
// metadata names another leader than broker for any of parts.
func (c *Client) whileLeading(ctx context.Context, broker int32, parts []*storagev1.TopicPartition) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			changed := c.metadataChanged()
			m := c.Metadata()
			for _, p := range parts {
				if l, _, ok := leaderOf(m, p.GetTopic(), p.GetPartition()); ok && l != broker {
					cancel()
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	return ctx, cancel
}
