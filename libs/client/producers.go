package client

import (
	"context"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// DescribeProducers answers the producers of one partition from its leader
// (Kafka's DescribeProducers), by producer id, following a leader change
// (a retriable refusal is asked again, a few times, after the metadata
// moves). An open transaction's current_txn_start_offset there holds the
// partition's last stable offset back.
func (c *Client) DescribeProducers(ctx context.Context, topic string, partition int32) ([]*storagev1.ProducerState, error) {
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		bc, epoch, err := c.leaderOf(topic, partition)
		var out []*storagev1.ProducerState
		if err == nil {
			var resp *storagev1.DescribeProducersResponse
			resp, err = bc.st.DescribeProducers(ctx, &storagev1.DescribeProducersRequest{Partitions: []*storagev1.DescribeProducersPartition{
				{Topic: topic, Partition: partition, CurrentLeaderEpoch: epoch}}})
			err = rpcerr.FromStatus(err)
			if err == nil {
				err = errs.Errorf(errs.UnknownServerError, "%s-%d was not answered", topic, partition)
				for _, r := range resp.GetPartitions() {
					if r.GetTopic() == topic && r.GetPartition() == partition {
						err, out = nil, r.GetProducers()
						if code := r.GetErrorCode(); code != skeinv1.ErrorCode_NONE {
							err = errs.Errorf(errs.ForCode(errs.Code(code)), "%s", r.GetErrorMessage())
						}
					}
				}
			}
		}
		if err == nil {
			return out, nil
		}
		if !errs.IsRetriable(err) || attempt >= 3 || ctx.Err() != nil || c.waitRetry(ctx, attempt, err) != nil {
			return nil, err
		}
	}
}
