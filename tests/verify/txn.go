package verify

import (
	"fmt"
	"sync"
	"time"

	"skein/libs/history"
	"skein/tests/e2e"
)

// txnTopic is the topic of the transactional producer: a topic of its own,
// because a history names partitions without their topic.
const txnTopic = "verify-tx"

type producerIdentity struct {
	ProducerID    e2e.Int64 `json:"producer_id"`
	ProducerEpoch int32     `json:"producer_epoch"`
}

// txnProducer is a REST transactional producer (transactional id txnID):
// each transaction writes one record to every partition of txnTopic and
// commits. A failed produce aborts the transaction; a failed end asks for
// a new producer epoch, which completes or aborts what was left open. It
// records every send with its transaction and how each transaction ended.
func (c *cluster) txnProducer(h *history.Recorder, parts int, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	var id *producerIdentity
	for n := 0; ; n++ {
		select {
		case <-stop:
			if id == nil {
				// Leave nothing open: a new epoch ends what the last
				// transaction left.
				_ = waitFor(c.ctx, 30*time.Second, "a transactional producer id", func() error {
					return c.do(15*time.Second, "POST", "/v1/producers", map[string]any{"transactional_id": txnID}, nil)
				})
			}
			return
		default:
		}
		if id == nil {
			var got producerIdentity
			if err := c.do(15*time.Second, "POST", "/v1/producers", map[string]any{"transactional_id": txnID, "transaction_timeout_ms": 20000}, &got); err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			id = &got
		}
		txn := fmt.Sprintf("tx%d", n)
		ok := true
		for p := range int32(parts) {
			v := fmt.Sprintf("%s-p%d", txn, p)
			var resp struct {
				Results []struct {
					Offset    e2e.Int64 `json:"offset"`
					ErrorCode string    `json:"error_code"`
					Message   string    `json:"message"`
					Outcome   string    `json:"outcome"`
				} `json:"results"`
			}
			start := time.Now()
			err := c.do(15*time.Second, "POST", fmt.Sprintf("/v1/topics/%s/partitions/%d/records", txnTopic, p), map[string]any{
				"transactional_id": txnID, "producer_id": id.ProducerID, "producer_epoch": id.ProducerEpoch, "base_sequence": 0,
				"records": []map[string]any{{"value": v}}}, &resp)
			s := history.Send{Producer: "txn", Partition: p, Value: v, Txn: txn, Invoke: start, Complete: time.Now()}
			switch {
			case err != nil:
				s.Outcome, s.Err = history.Unknown, err.Error()
			case len(resp.Results) != 1:
				s.Outcome, s.Err = history.Unknown, fmt.Sprintf("%d results", len(resp.Results))
			default:
				r := resp.Results[0]
				s.Outcome, s.Offset = history.OutcomeOf(r.Outcome, r.ErrorCode), int64(r.Offset)
				if s.Outcome != history.Written {
					s.Err = r.ErrorCode + ": " + r.Message
				}
			}
			h.Send(s)
			if s.Outcome != history.Written {
				ok = false
				break
			}
		}
		end := ":commit"
		if !ok {
			end = ":abort"
		}
		var next producerIdentity
		start := time.Now()
		err := c.do(15*time.Second, "POST", "/v1/transactions/"+txnID+end, id, &next)
		t := history.Txn{ID: txn, Outcome: history.TxnUnknown, Invoke: start, Complete: time.Now()}
		switch {
		case err == nil && ok:
			t.Outcome = history.TxnCommitted
		case err == nil:
			t.Outcome = history.TxnAborted
		case !ok:
			// No commit was sent: a new epoch aborts what was left open.
			var got producerIdentity
			start := time.Now()
			if ierr := c.do(15*time.Second, "POST", "/v1/producers", map[string]any{"transactional_id": txnID, "transaction_timeout_ms": 20000}, &got); ierr == nil {
				t = history.Txn{ID: txn, Outcome: history.TxnAborted, Invoke: start, Complete: time.Now()}
				next = got
				err = nil
			}
		}
		h.Txn(t)
		if err != nil {
			id = nil
			time.Sleep(200 * time.Millisecond)
			continue
		}
		id = &next
	}
}

// txnHistory prepares a transactional history for the checker: an
// acknowledged record of a transaction that did not commit is not required
// in the read_committed log, so its send counts as of unknown outcome (a
// read_committed poll that returned it is still an aborted or uncommitted
// read).
func txnHistory(h history.History) history.History {
	ended := map[string]history.TxnOutcome{}
	for _, t := range h.Txns {
		ended[t.ID] = t.Outcome
	}
	for i, s := range h.Sends {
		if s.Outcome == history.Written && ended[s.Txn] != history.TxnCommitted {
			h.Sends[i].Outcome = history.Unknown
		}
	}
	return h
}

// txnTail follows partition p of txnTopic read_committed with long polls
// until stop closes, recording every poll as the standalone consumer
// "txn-tail".
func (c *cluster) txnTail(h *history.Recorder, p int32, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	next := int64(0)
	for {
		select {
		case <-stop:
			return
		default:
		}
		var f struct {
			Records []struct {
				Offset e2e.Int64 `json:"offset"`
				Value  string    `json:"value"`
			} `json:"records"`
			Next e2e.Int64 `json:"next_offset"`
		}
		start := time.Now()
		err := c.do(10*time.Second, "GET", fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&max_records=1000&max_wait_ms=500&isolation_level=READ_COMMITTED", txnTopic, p, next), nil, &f)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		poll := history.Poll{Consumer: "txn-tail", ReadCommitted: true, Invoke: start, Complete: time.Now()}
		for _, r := range f.Records {
			poll.Records = append(poll.Records, history.Record{Partition: p, Offset: int64(r.Offset), Value: r.Value})
		}
		h.Poll(poll)
		if int64(f.Next) > next {
			next = int64(f.Next)
		}
	}
}
