package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client/partitioner"
	"skein/libs/errs"
	"skein/libs/record"
	"skein/libs/rpcerr"
)

// interruptGrace is how long an interrupted produce waits for the answers
// of what it sent.
var interruptGrace = 10 * time.Second

// maxLine bounds one stdin line (one record).
const maxLine = 16 << 20

// maxRecordsPerRequest bounds how many waiting lines go in one request.
const maxRecordsPerRequest = 500

// maxRequestBytes stops adding lines to a request once they reach it, well
// within the gateway's message limit (--max-request-bytes, 4 MiB by
// default); a line alone may pass it.
const maxRequestBytes = 1 << 20

// maxLineBytes is the longest line sent as a record: a request of one such
// record stays within the gateway's default message limit (4 MiB).
const maxLineBytes = 4<<20 - 64<<10

// line is one stdin line and its number.
type line struct {
	n    int
	text string
}

// headerFlag is --header KEY=VALUE, repeatable: headers every record
// carries, in the order given (a key may repeat, as in a Kafka record).
type headerFlag struct{ headers []*skeinv1.Header }

func (h *headerFlag) String() string {
	if h == nil {
		return ""
	}
	var b strings.Builder
	for i, x := range h.headers {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(x.GetKey() + "=" + x.GetValue())
	}
	return b.String()
}

func (*headerFlag) repeatable() {}

func (h *headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	h.headers = append(h.headers, &skeinv1.Header{Key: k, Value: ptr(val)})
	return nil
}

// toRecord splits a line into key and value at the first separator. Text
// that is not valid UTF-8 goes in the bytes fields, as it is. Every record
// carries headers.
func toRecord(l line, sep string, partition *int32, headers []*skeinv1.Header) (*skeinv1.ProduceRecord, error) {
	r := &skeinv1.ProduceRecord{Partition: partition, Headers: headers}
	if len(l.text) > maxLineBytes {
		return nil, fmt.Errorf("line %d is %d bytes, more than a record sent through the gateway may be (%d)", l.n, len(l.text), maxLineBytes)
	}
	v := l.text
	if sep != "" {
		k, rest, ok := strings.Cut(l.text, sep)
		if !ok {
			return nil, fmt.Errorf("line %d has no key separator %q", l.n, sep)
		}
		if utf8.ValidString(k) {
			r.Key = ptr(k)
		} else {
			r.KeyBytes = []byte(k)
		}
		v = rest
	}
	if utf8.ValidString(v) {
		r.Value = ptr(v)
	} else {
		r.ValueBytes = []byte(v)
	}
	return r, nil
}

// recordMessage is a refusal's message as the command prints it, after the
// line it is about: the gateway names a record by its place in the request
// ("record 3 is ..."), which means nothing to whoever wrote the lines, so
// that name becomes "the record".
func recordMessage(msg string, i int) string {
	name := "record " + strconv.Itoa(i)
	if rest, ok := strings.CutPrefix(msg, name); ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
		return "the record" + rest
	}
	return msg
}

// lineTooLong says which line was too long for the scanner, in place of
// bufio's "token too long"; other errors come back as they are.
func lineTooLong(err error, n int) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("line %d is longer than %d bytes", n, maxLine)
	}
	return err
}

// recordKey is a record's key as bytes; nil when it has none.
func recordKey(r *skeinv1.ProduceRecord) []byte {
	if r.Key != nil {
		return []byte(*r.Key)
	}
	return r.KeyBytes
}

func produceCmd(ctx context.Context, args []string, stdio IO) error {
	f := newFlags("produce", stdio, true)
	sep := f.String("key-separator", "", "split each line into key and value at the first SEP (no key without it)")
	acksFlag := f.String("acks", "-1", "0, 1, or -1 or all (every in-sync replica)")
	partition := f.Int("partition", -1, "write every record to this partition (default: by key, sticky without one)")
	txid := f.String("transactional-id", "", "write every line in one transaction of this transactional id, committed at the end of input (aborted on any error)")
	codec := f.String("compression", "", "codec of the batches for a topic whose compression.type is producer: none, gzip, snappy, lz4 or zstd (default: the gateway's); a topic that names a codec keeps its own")
	headers := &headerFlag{}
	f.Var(headers, "header", "a header KEY=VALUE every record carries (repeatable, kept in order; a key may repeat)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("produce takes one topic, got %q", pos)
	}
	var compression *string
	if *codec != "" {
		if _, err := record.ParseCompression(*codec); err != nil {
			return usagef("--compression %q: not one of none, gzip, snappy, lz4, zstd", *codec)
		}
		compression = codec
	}
	acks := new(int)
	switch *acksFlag {
	case "all", "-1":
		*acks = -1
	case "0", "1":
		*acks = int((*acksFlag)[0] - '0')
	default:
		return usagef("--acks %s: want 0, 1, or -1 or all", *acksFlag)
	}
	switch {
	case *partition < -1:
		return usagef("--partition %d: want a partition number, or -1 for the default", *partition)
	}
	if _, err := int32Flag("partition", *partition); err != nil {
		return err
	}
	if *txid != "" {
		if *acks != -1 {
			return usagef("--transactional-id writes with acks=all; --acks %d does not go with it", *acks)
		}
		return transactionalProduce(ctx, f, stdio, pos[0], *txid, *sep, int32(*partition), compression, headers.headers)
	}
	var part *int32
	if *partition >= 0 {
		part = ptr(int32(*partition))
	}
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	// The stream outlives an interrupt: what was sent is answered before
	// the command ends, so it can say what was written.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stream, err := skeinv1.NewProducerServiceClient(conn).ProduceStream(sctx)
	if err != nil {
		return err
	}
	// An interrupt gives the gateway 10 s to answer what was sent, wherever
	// the command waits (a send held by flow control, the last answers),
	// then ends the stream.
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
		case <-finished:
			return
		}
		select {
		case <-time.After(interruptGrace):
			cancel()
		case <-finished:
		}
	}()

	lines, readErr := readInput(stdio.In, maxRecordsPerRequest, sctx.Done())

	// Answers arrive by correlation id; firstLine maps one back to its lines.
	var mu sync.Mutex
	firstLine := map[uint64]int{}
	failed, unknown, sent := 0, 0, 0 // failed includes unknown: an UNKNOWN outcome may be written
	recvDone := make(chan error, 1)
	go func() {
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				recvDone <- nil
				return
			}
			if err != nil {
				recvDone <- err
				return
			}
			mu.Lock()
			first := firstLine[resp.GetCorrelationId()]
			delete(firstLine, resp.GetCorrelationId())
			// A refusal of the whole request (an unknown topic, say) is on
			// each of its records: neighbours with the same error are
			// told once, as a range of lines.
			results := resp.GetResults()
			for i := 0; i < len(results); i++ {
				r := results[i]
				if *f.json {
					_ = printJSONLine(stdio.Out, r) // one result per line, in input order
				}
				if r.GetErrorCode() == skeinv1.ErrorCode_NONE {
					continue
				}
				msg := recordMessage(r.GetMessage(), i)
				j := i
				for ; j+1 < len(results) && results[j+1].GetErrorCode() == r.GetErrorCode() && recordMessage(results[j+1].GetMessage(), j+1) == msg; j++ {
					if *f.json {
						_ = printJSONLine(stdio.Out, results[j+1])
					}
				}
				for _, q := range results[i : j+1] {
					failed++
					if q.GetOutcome() == skeinv1.ProduceOutcome_UNKNOWN {
						unknown++
					}
				}
				if j == i {
					fmt.Fprintf(stdio.Err, "line %d: %s: %s\n", first+i, r.GetErrorCode(), msg)
				} else {
					fmt.Fprintf(stdio.Err, "lines %d-%d: %s: %s\n", first+i, first+j, r.GetErrorCode(), msg)
				}
				i = j
			}
			mu.Unlock()
		}
	}()

	var corr uint64
	var sendErr, lineErr error
	interrupted := false
send:
	for {
		var l line
		var ok bool
		select {
		case l, ok = <-lines:
		case <-ctx.Done():
			interrupted = true
			break send
		}
		if !ok {
			break
		}
		batch, size := []line{l}, len(l.text)
	more:
		for len(batch) < maxRecordsPerRequest && size < maxRequestBytes {
			select {
			case l, ok := <-lines:
				if !ok {
					break more
				}
				batch, size = append(batch, l), size+len(l.text)
			default:
				break more
			}
		}
		req := &skeinv1.ProduceStreamRequest{CorrelationId: corr, Topic: pos[0], Acks: ptr(int32(*acks)), Compression: compression}
		for _, l := range batch {
			r, err := toRecord(l, *sep, part, headers.headers)
			if err != nil {
				lineErr = err // the lines before it still go
				break
			}
			req.Records = append(req.Records, r)
		}
		if len(req.Records) > 0 {
			mu.Lock()
			firstLine[corr] = batch[0].n
			sent += len(req.Records)
			mu.Unlock()
			if sendErr = stream.Send(req); sendErr != nil {
				break
			}
			corr++
		}
		if lineErr != nil {
			break
		}
	}
	if sendErr == nil {
		if lineErr == nil && !interrupted {
			select {
			case err := <-readErr:
				if err != nil {
					lineErr = fmt.Errorf("reading stdin: %w", err)
				}
			default:
			}
		}
		sendErr = stream.CloseSend()
	}
	// Every request sent is answered before the stream ends (or, after an
	// interrupt, within 10 s).
	recvErr := <-recvDone
	interrupted = interrupted || ctx.Err() != nil
	if recvErr != nil {
		if interrupted {
			mu.Lock()
			fmt.Fprintf(stdio.Err, "interrupted: the gateway did not answer every request in time; of the %d records sent, %d failed and the rest may or may not be written\n", sent, failed)
			mu.Unlock()
			return ctx.Err()
		}
		return recvErr
	}
	if sendErr != nil && !errors.Is(sendErr, io.EOF) {
		return sendErr
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case lineErr != nil:
		return fmt.Errorf("%w; nothing after it was sent, and %d of the %d records before it were written", lineErr, sent-failed, sent)
	case interrupted:
		fmt.Fprintf(stdio.Err, "interrupted: %d of the %d records sent were written\n", sent-failed, sent)
		return ctx.Err()
	case unknown > 0:
		return fmt.Errorf("%d of %d records were not written, and %d more may or may not be (their outcome is UNKNOWN)", failed-unknown, sent, unknown)
	case failed > 0:
		return fmt.Errorf("%d of %d records were not written", failed, sent)
	}
	return nil
}

// transactionalProduce writes every stdin line in one transaction: a
// producer id and epoch for the transactional id (which fences any older
// instance of it), the records of each partition in order under that
// identity, then a commit at the end of input. Any failure, or an
// interrupt, aborts the transaction: read_committed consumers see all the
// lines or none.
func transactionalProduce(ctx context.Context, f *flags, stdio IO, topic, txid, sep string, partition int32, compression *string, headers []*skeinv1.Header) error {
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	admin := skeinv1.NewAdminServiceClient(conn)
	prod := skeinv1.NewProducerServiceClient(conn)
	txns := skeinv1.NewTransactionServiceClient(conn)

	d, err := admin.DescribeTopic(ctx, &skeinv1.DescribeTopicRequest{Topic: topic})
	if err != nil {
		return err
	}
	n := int32(len(d.GetTopic().GetPartitions()))
	if partition >= n {
		return fmt.Errorf("topic %s has %d partitions, no partition %d", topic, n, partition)
	}
	// Every line first: the transaction goes out only once the input is
	// whole, so a bad line aborts nothing and writes nothing.
	byPartition := map[int32][]*skeinv1.ProduceRecord{}
	lineOf := map[int32][]int{} // each record's place in the input, from 0
	lineNo := map[int32][]int{} // and its line number
	var order []int32
	sticky := partition
	if sticky < 0 {
		sticky = rand.Int32N(n)
	}
	// Read beside the interrupt: an open input (a terminal's) does not hold
	// an interrupted produce, which then says what became of the lines.
	stopRead := make(chan struct{})
	defer close(stopRead)
	input, readErr := readInput(stdio.In, 0, stopRead)
	lines := 0
	for reading := true; reading; {
		var l line
		select {
		case next, ok := <-input:
			if !ok {
				if err := <-readErr; err != nil { // sent before the close
					return fmt.Errorf("reading stdin: %w", err)
				}
				reading = false
				continue
			}
			l = next
		case <-ctx.Done():
			// Interrupted while the input was read: no transaction began.
			fmt.Fprintf(stdio.Err, "interrupted: nothing of the %d lines read was written\n", lines)
			return ctx.Err()
		}
		r, err := toRecord(l, sep, nil, headers)
		if err != nil {
			return err
		}
		p := partition
		if p < 0 {
			p = sticky
			if k := recordKey(r); k != nil {
				p = partitioner.ForKey(k, n)
			}
		}
		if _, ok := byPartition[p]; !ok {
			order = append(order, p)
		}
		byPartition[p] = append(byPartition[p], r)
		lineOf[p] = append(lineOf[p], lines)
		lineNo[p] = append(lineNo[p], l.n)
		lines++
	}
	if lines == 0 {
		return nil
	}

	id, err := txns.InitProducer(ctx, &skeinv1.InitProducerRequest{TransactionalId: txid})
	if err != nil {
		return err
	}
	abortTxn := func(cause error) error {
		why := describeErr(cause)
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := txns.AbortTransaction(actx, &skeinv1.AbortTransactionRequest{TransactionalId: txid, ProducerId: id.GetProducerId(), ProducerEpoch: id.GetProducerEpoch()}); err != nil {
			if errs.Of(rpcerr.FromStatus(err)) == errs.InvalidTxnState {
				// No partition had joined the transaction: it never began.
				return fmt.Errorf("%s: nothing was written", why)
			}
			return fmt.Errorf("%s (and the abort failed: %s)", why, describeErr(err))
		}
		return fmt.Errorf("%s: transaction aborted, nothing of it is visible to read_committed consumers", why)
	}
	abort := func(cause error) error {
		err := abortTxn(cause)
		if ctx.Err() != nil {
			// Interrupted: say what became of the transaction, and end
			// with the interrupt's exit status.
			fmt.Fprintln(stdio.Err, "skein: interrupted:", err)
			return ctx.Err()
		}
		return err
	}
	results := make([]*skeinv1.ProduceResult, lines) // in input order, for --json
	for _, p := range order {
		recs := byPartition[p]
		for seq := 0; seq < len(recs); seq += maxRecordsPerRequest {
			chunk := recs[seq:min(seq+maxRecordsPerRequest, len(recs))]
			resp, err := prod.Produce(ctx, &skeinv1.ProduceRequest{Topic: topic, Partition: ptr(p), Acks: ptr(int32(-1)), Records: chunk,
				TransactionalId: txid, ProducerId: ptr(id.GetProducerId()), ProducerEpoch: ptr(id.GetProducerEpoch()), BaseSequence: ptr(int32(seq)),
				Compression: compression})
			if err != nil {
				return abort(err)
			}
			for i, r := range resp.GetResults() {
				if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
					return abort(fmt.Errorf("line %d (partition %d): %s: %s", lineNo[p][min(seq+i, len(lineNo[p])-1)], p, r.GetErrorCode(), recordMessage(r.GetMessage(), i)))
				}
				if i < len(chunk) {
					results[lineOf[p][seq+i]] = r
				}
			}
			if n := len(resp.GetResults()); n != len(chunk) {
				return abort(fmt.Errorf("partition %d: %d results for %d records", p, n, len(chunk)))
			}
		}
	}
	if ctx.Err() != nil {
		return abort(ctx.Err())
	}
	if _, err := txns.CommitTransaction(ctx, &skeinv1.CommitTransactionRequest{TransactionalId: txid, ProducerId: id.GetProducerId(), ProducerEpoch: id.GetProducerEpoch()}); err != nil {
		return err
	}
	if *f.json {
		// Once committed, as the plain produce prints them: one result
		// per line of input, in its order.
		for _, r := range results {
			if err := printJSONLine(stdio.Out, r); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(stdio.Err, "committed %s on %s in one transaction (transactional id %s, producer %d epoch %d)\n",
		plural(lines, "record"), plural(len(order), "partition"), txid, id.GetProducerId(), id.GetProducerEpoch())
	return nil
}

// readInput reads in's lines into the channel it answers, which is closed
// at the end of the input once the read's error (nil at its end) is in
// the other; a close of stop ends it early, with no error sent.
func readInput(in io.Reader, buffer int, stop <-chan struct{}) (<-chan line, <-chan error) {
	lines := make(chan line, buffer)
	readErr := make(chan error, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), maxLine)
		n := 1
		for ; sc.Scan(); n++ {
			select {
			case lines <- line{n, sc.Text()}:
			case <-stop:
				return
			}
		}
		readErr <- lineTooLong(sc.Err(), n)
	}()
	return lines, readErr
}

// plural is "1 record", "2 records".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
