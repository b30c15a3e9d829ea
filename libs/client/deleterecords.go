package client

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// DeletedRecords is one partition's answer to DeleteRecords.
type DeletedRecords struct {
	Partition int32
	// LowWatermark is the partition's log start offset once every in-sync
	// replica has it: the earliest offset a consumer can read now (-1 with
	// Err).
	LowWatermark int64
	Err          error
}

// deleteRecordsWait is how long a leader waits for its in-sync replicas to
// take a new log start, unless the caller's deadline is sooner.
const deleteRecordsWait = 30 * time.Second

// DeleteRecords deletes the records of topic's partitions before the
// offsets of before (partition → offset; -1 is the partition's high
// watermark), as Kafka's Admin.deleteRecords: each partition's leader
// moves its log start offset up and answers once the in-sync replicas
// have it, within 30 s or a little before ctx's deadline, whichever is
// sooner (REQUEST_TIMED_OUT after it: the leader deleted, and that is not
// retried). A leader change is followed; a partition's error is in its
// answer, which comes in partition order.
func (c *Client) DeleteRecords(ctx context.Context, topic string, before map[int32]int64) ([]DeletedRecords, error) {
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	if m := c.Metadata(); m.PartitionCount(topic) == 0 {
		return nil, noTopic(m, topic)
	}
	results := make(map[int32]*DeletedRecords, len(before))
	todo := make([]int32, 0, len(before))
	for p := range before {
		todo = append(todo, p)
	}
	slices.Sort(todo)
	for attempt := 0; len(todo) > 0; attempt++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		byBroker := map[*brokerConn][]*storagev1.DeleteRecordsPartition{}
		for _, p := range todo {
			bc, epoch, err := c.leaderOf(topic, p)
			if err != nil {
				results[p] = &DeletedRecords{Partition: p, LowWatermark: -1, Err: err}
				continue
			}
			byBroker[bc] = append(byBroker[bc], &storagev1.DeleteRecordsPartition{Topic: topic, Partition: p, Offset: before[p], CurrentLeaderEpoch: epoch})
		}
		for bc, parts := range byBroker {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := bc.st.DeleteRecords(ctx, &storagev1.DeleteRecordsRequest{Partitions: parts, TimeoutMs: waitMs(ctx, deleteRecordsWait)})
				mu.Lock()
				defer mu.Unlock()
				for _, dp := range parts {
					results[dp.GetPartition()] = &DeletedRecords{Partition: dp.GetPartition(), LowWatermark: -1, Err: rpcerr.FromStatus(err)}
				}
				for _, r := range resp.GetPartitions() {
					d := &DeletedRecords{Partition: r.GetPartition(), LowWatermark: r.GetLowWatermark()}
					if code := r.GetErrorCode(); code != skeinv1.ErrorCode_NONE {
						d.LowWatermark, d.Err = -1, errs.Errorf(errs.ForCode(errs.Code(code)), "%s", r.GetErrorMessage())
					}
					results[r.GetPartition()] = d
				}
			}()
		}
		wg.Wait()
		var retry []int32
		var lastErr error
		for _, p := range todo {
			if r := results[p]; r.Err != nil && errs.IsRetriable(r.Err) && errs.Of(r.Err) != errs.RequestTimedOut {
				retry, lastErr = append(retry, p), r.Err
			}
		}
		if len(retry) == 0 || attempt >= 3 || ctx.Err() != nil || c.waitRetry(ctx, attempt, lastErr) != nil {
			break
		}
		todo = retry
	}
	out := make([]DeletedRecords, 0, len(results))
	for _, p := range slices.Sorted(maps.Keys(results)) {
		out = append(out, *results[p])
	}
	return out, nil
}

// waitMs is how long a server may wait for the caller of ctx: at most
// limit, and short enough of ctx's deadline (by a tenth of what is left,
// at most 2 s) that its answer arrives before the deadline does.
func waitMs(ctx context.Context, limit time.Duration) int32 {
	d := limit
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		d = min(d, left-min(left/10, 2*time.Second))
	}
	return int32(max(d.Milliseconds(), 1))
}
