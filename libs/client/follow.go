package client

import (
	"context"
	"errors"
	"io"

	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/errs"
	"skein/libs/grpcopt"
	"skein/libs/rpcerr"
)

// Follow reads a partition's committed records from req.Offset on, as they
// are committed, through one stream from its leader (rather than a fetch
// request per answer), and calls fn with each answer. The records are
// views, as FetchView's: their bytes are valid only until fn returns.
//
// Each answer is at most req.MaxBytes of batches (1 MiB when 0) and ends
// with the batch holding its req.MaxRecords-th record when MaxRecords is
// positive; fn is given every record of the batches sent, so an answer may
// hold a few records more than MaxRecords. MinBytes and MaxWait do not
// apply: an answer comes as soon as there is something to answer.
//
// Follow goes on across leader changes, from after the last record fn was
// given. It returns ctx's error when ctx ends, fn's error when fn returns
// one, and errors retrying cannot fix (OFFSET_OUT_OF_RANGE, say, or a topic
// that is gone) at once.
func (c *Client) Follow(ctx context.Context, req FetchRequest, fn func(*FetchResult) error) error {
	if err := c.WaitReady(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		moved, err := c.followOnce(ctx, &req, fn)
		if fe, ok := errors.AsType[fnError](err); ok {
			return fe.err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errs.IsRetriable(err) || errs.Of(err) == errs.CorruptMessage { // a damaged batch answers the same again
			return err
		}
		if errs.Of(err) == errs.UnknownTopicOrPartition {
			if _, ok := c.Metadata().Partition(req.Topic, req.Partition); !ok {
				return err // the topic or partition is gone (or never was)
			}
		}
		if moved {
			attempt = 0 // the stream worked for a while: start the backoff over
		}
		if c.waitRetry(ctx, attempt, err) != nil {
			return ctx.Err()
		}
	}
}

// fnError carries the error of Follow's fn out of followOnce.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// followOnce follows req's partition on its current leader until the
// stream fails, moving req.Offset past each answer fn was given; moved
// reports whether it did.
func (c *Client) followOnce(ctx context.Context, req *FetchRequest, fn func(*FetchResult) error) (moved bool, err error) {
	bc, epoch, err := c.leaderOf(req.Topic, req.Partition)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go c.cancelOnLeaderChange(ctx, cancel, req.Topic, req.Partition, bc.id, epoch)
	st, err := bc.followClient()
	if err != nil {
		return false, err
	}
	stream, err := st.Follow(ctx, &storagev1.FollowRequest{
		Topic: req.Topic, Partition: req.Partition, FetchOffset: req.Offset, CurrentLeaderEpoch: epoch,
		MaxBytes: req.MaxBytes, MaxRecords: int32(min(max(req.MaxRecords, 0), 1<<31-1)), IsolationLevel: req.Isolation,
	})
	if err != nil {
		return false, followErr(ctx, req, err)
	}
	// Each answer is decoded into a pooled buffer, given back when the next
	// one arrives (or when the stream ends).
	resp := &storagev1.FollowResponse{}
	reply := &grpcopt.Pooled{Msg: resp}
	defer reply.Release()
	for {
		if err := stream.RecvMsg(reply); err != nil {
			return moved, followErr(ctx, req, err)
		}
		pr := resp.GetPartition()
		if pr == nil {
			return moved, errs.Errorf(errs.UnknownServerError, "a follow answer for %s-%d carries no partition", req.Topic, req.Partition)
		}
		// Every record of the answer is the reader's: no MaxRecords cut.
		res, err := decodeFetch(FetchRequest{Topic: req.Topic, Partition: req.Partition, Offset: req.Offset, Isolation: req.Isolation}, pr, true)
		if err != nil {
			return moved, err
		}
		if err := fn(res); err != nil {
			return moved, fnError{err}
		}
		req.Offset, moved = res.NextOffset, true
		if res.damaged != nil {
			// The leader sent past a damaged batch, and will not send it
			// again: the stream would wait for ever.
			return moved, res.damaged
		}
	}
}

// followErr turns the end of a follow stream into the error to act on.
func followErr(ctx context.Context, req *FetchRequest, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errLeaderMoved) {
		return errs.Errorf(errs.NotLeaderOrFollower, "%s-%d: %v", req.Topic, req.Partition, cause)
	}
	if errors.Is(err, io.EOF) {
		// The leader ends a stream only with an error status; an end
		// without one is a connection that went away.
		return errs.Errorf(errs.NetworkException, "the leader of %s-%d ended the follow stream", req.Topic, req.Partition)
	}
	return rpcerr.FromStatus(err)
}
