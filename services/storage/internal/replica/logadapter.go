package replica

import (
	plog "skein/libs/log"
	"skein/libs/record"
	"skein/services/storage/internal/partition"
)

// logAdapter presents a libs/log Log as the replica's partition.Log.
type logAdapter struct{ l *plog.Log }

func (a logAdapter) LogEndOffset() record.Offset   { return a.l.LEO() }
func (a logAdapter) LogStartOffset() record.Offset { return a.l.LogStartOffset() }
func (a logAdapter) LatestEpoch() record.Epoch     { return a.l.LatestEpoch() }

func (a logAdapter) EndOffsetFor(e record.Epoch) (record.Epoch, record.Offset) {
	return a.l.EndOffsetFor(e)
}

func (a logAdapter) AppendAsLeader(b record.Batch, epoch record.Epoch) (partition.Appended, error) {
	info, err := a.l.Append(b, epoch)
	return partition.Appended{First: info.FirstOffset, Last: info.LastOffset, Uncompressed: info.UncompressedBytes, LogAppendTime: info.LogAppendTime}, err
}

func (a logAdapter) AppendAsFollower(batches []byte) error {
	_, err := a.l.AppendAsFollower(batches)
	return err
}

func (a logAdapter) SyncIfDue(next record.Offset) error { return a.l.SyncIfDue(next) }

func (a logAdapter) AssignEpoch(e record.Epoch) error { return a.l.AssignEpoch(e) }
func (a logAdapter) Failed() bool                     { return a.l.Failed() }
func (a logAdapter) DurableEnd() record.Offset        { return a.l.DurableEnd() }

func (a logAdapter) Read(offset record.Offset, maxBytes int, maxOffset record.Offset) ([]byte, error) {
	res, err := a.l.Read(offset, maxBytes, maxOffset)
	return res.Records, err
}

func (a logAdapter) ReadInto(dst []byte, offset record.Offset, maxBytes int, maxOffset record.Offset, maxRecords int) ([]byte, error) {
	res, err := a.l.ReadRecordsInto(dst, offset, maxBytes, maxOffset, maxRecords)
	return res.Records, err
}

func (a logAdapter) Truncate(offset record.Offset) error { return a.l.Truncate(offset) }

func (a logAdapter) OffsetForTimestamp(ts int64) (record.Offset, int64, bool) {
	r, ok, err := a.l.OffsetForTimestamp(ts)
	if err != nil || !ok {
		return 0, 0, false
	}
	return r.Offset, r.Timestamp, true
}

func (a logAdapter) TruncateFullyAndStartAt(offset record.Offset) error {
	return a.l.TruncateFullyAndStartAt(offset)
}

func (a logAdapter) AdvanceLogStart(offset record.Offset) error {
	return a.l.AdvanceLogStart(offset)
}
