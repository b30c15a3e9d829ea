package clienttest

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/peerauth"
	"skein/libs/record"
	"skein/libs/rpcerr"
)

type tp struct {
	topic     string
	partition int32
}

// partitionLog is one partition held in memory. 0 <= logStart <= leo; the HW
// is the LEO (replication is instant).
type partitionLog struct {
	batches  []record.Batch
	logStart int64
	leo      int64
	grew     chan struct{}            // closed and replaced when the log grows
	seqs     map[int64][]writtenBatch // per producer id, its batches in order (of its epoch)
	epochs   map[int64]int16          // per producer id, its epoch
	// followerLEO: what SetFollowerLEO told this node its followers' LEOs are.
	followerLEO map[int32]int64
}

type writtenBatch struct {
	baseSeq, lastSeq int32
	baseOffset       int64
}

// openSpan tracks, for one partition, the batches appended and whether
// their request was answered yet, and the widest run of batches appended
// from the oldest unanswered one.
type openSpan struct {
	answered []bool // per appended batch (of any producer), in append order
	max      int
}

// Storage is a fake storage node.
type Storage struct {
	storagev1.UnimplementedStorageServiceServer

	ID   int32
	ctrl *Controller

	mu   sync.Mutex
	logs map[tp]*partitionLog
	fail map[tp][]error
	// failAfter holds the answers of appends that write and then fail.
	failAfter map[tp][]error
	// failList holds the answers of the next ListOffsets of a partition.
	failList map[tp][]error
	fetches  []*storagev1.FetchRequest
	follows  []*storagev1.FollowRequest
	// followSent counts the batch bytes Follow streams' Sends returned
	// from (a Send blocks while the reader's flow-control window is full).
	followSent int
	// followSending counts the batch bytes handed to those Sends, before
	// each: a caller that has read a batch sees it counted here.
	followSending int
	// followOpen counts the Follow streams being served now.
	followOpen int
	streams    int
	refused    map[string]int // produce refusals by error name
	// named counts the principals calls named (client.OnBehalfOf), by
	// "produce:" or "fetch:" and the principal.
	named   map[string]int
	stalled chan struct{}        // non-nil while Stall holds requests; closed to release them
	held    map[tp]chan struct{} // HoldAnswers: answers of requests with the partition wait for the close
	spans   map[tp]*openSpan
}

// MaxOpenSpan answers the most batches of the partition that were ever
// appended from its oldest batch whose answer was not yet sent, that one
// included: how far a producer ran ahead of an unanswered batch.
func (s *Storage) MaxOpenSpan(topic string, partition int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.spans[tp{topic, partition}]; sp != nil {
		return sp.max
	}
	return 0
}

// noteAppendedLocked records a request's appended batches as unanswered and
// answers their indexes per partition. mu held.
func (s *Storage) noteAppendedLocked(k tp) int {
	if s.spans == nil {
		s.spans = map[tp]*openSpan{}
	}
	sp := s.spans[k]
	if sp == nil {
		sp = &openSpan{}
		s.spans[k] = sp
	}
	sp.answered = append(sp.answered, false)
	i := len(sp.answered) - 1
	oldest := slices.Index(sp.answered, false)
	sp.max = max(sp.max, len(sp.answered)-oldest)
	return i
}

// noteAnswered marks batches answered.
func (s *Storage) noteAnswered(idx map[tp][]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, is := range idx {
		for _, i := range is {
			s.spans[k].answered[i] = true
		}
	}
}

// HoldAnswers makes this node append the batches of every request that
// carries the partition at once but hold the request's answer until the
// returned release is called, while later requests on the same stream are
// answered — as a real node answers a request only once its slowest
// partition is acknowledged, so one partition's answers can return out of
// order.
func (s *Storage) HoldAnswers(topic string, partition int32) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.held == nil {
		s.held = map[tp]chan struct{}{}
	}
	s.held[tp{topic, partition}] = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.held, tp{topic, partition})
			s.mu.Unlock()
			close(ch)
		})
	}
}

// holdFor answers the hold channel of the first held partition req carries.
func (s *Storage) holdFor(req *storagev1.ProduceRequest) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pp := range req.GetPartitions() {
		if ch, ok := s.held[tp{pp.GetTopic(), pp.GetPartition()}]; ok {
			return ch
		}
	}
	return nil
}

// Stall holds every produce and fetch request this node receives from now
// on unanswered and unprocessed, as a paused (SIGSTOP) or cut-off node
// would, until the returned release is called; then they run as usual.
func (s *Storage) Stall() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.stalled = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.stalled = nil
			s.mu.Unlock()
			close(ch)
		})
	}
}

// waitStall blocks while the node is stalled, or until ctx ends.
func (s *Storage) waitStall(ctx context.Context) {
	s.mu.Lock()
	ch := s.stalled
	s.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// NewStorage returns node id, serving what ctrl's metadata says it leads.
func NewStorage(id int32, ctrl *Controller) *Storage {
	return &Storage{ID: id, ctrl: ctrl, logs: map[tp]*partitionLog{}, fail: map[tp][]error{}, failAfter: map[tp][]error{}, refused: map[string]int{}, named: map[string]int{}}
}

// ForgetProducers drops what a partition of this node knows of its
// producers, as a node does after --producer-id-expiration: an id it does
// not know starts at sequence 0 again.
func (s *Storage) ForgetProducers(topic string, partition int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logLocked(tp{topic, partition})
	l.seqs, l.epochs = map[int64][]writtenBatch{}, map[int64]int16{}
}

// FailNext makes the next n produce attempts on a partition of this node
// answer err (a row of libs/errs) before anything is written.
func (s *Storage) FailNext(topic string, partition int32, err error, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < n; i++ {
		s.fail[tp{topic, partition}] = append(s.fail[tp{topic, partition}], err)
	}
}

// FailAfterAppendNext makes the next n appends to a partition of this node
// write their batches and then answer err, as a leader does that loses its
// leadership (NOT_LEADER_OR_FOLLOWER) or fails its fsync
// (KAFKA_STORAGE_ERROR) while the batch waits for its followers. They come
// before the refusals FailNext queued.
func (s *Storage) FailAfterAppendNext(topic string, partition int32, err error, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < n; i++ {
		s.failAfter[tp{topic, partition}] = append(s.failAfter[tp{topic, partition}], err)
	}
}

// FailListOffsetsNext makes the next n ListOffsets of a partition of this
// node answer err for it, as a new leader answers OFFSET_NOT_AVAILABLE
// until its high watermark has caught up.
func (s *Storage) FailListOffsetsNext(topic string, partition int32, err error, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failList == nil {
		s.failList = map[tp][]error{}
	}
	for i := 0; i < n; i++ {
		s.failList[tp{topic, partition}] = append(s.failList[tp{topic, partition}], err)
	}
}

// ClearFailures drops what FailNext and FailAfterAppendNext queued for a
// partition and was not used.
func (s *Storage) ClearFailures(topic string, partition int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fail, tp{topic, partition})
	delete(s.failAfter, tp{topic, partition})
}

// CopyLog makes this node's copy of a partition equal to from's, producer
// sequences included, as replication would before a leader change.
func (s *Storage) CopyLog(from *Storage, topic string, partition int32) {
	from.mu.Lock()
	src := from.logLocked(tp{topic, partition})
	batches := slices.Clone(src.batches)
	logStart, leo := src.logStart, src.leo
	seqs := map[int64][]writtenBatch{}
	for pid, w := range src.seqs {
		seqs[pid] = slices.Clone(w)
	}
	epochs := maps.Clone(src.epochs)
	from.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	dst := s.logLocked(tp{topic, partition})
	dst.batches, dst.logStart, dst.leo, dst.seqs, dst.epochs = batches, logStart, leo, seqs, epochs
	close(dst.grew)
	dst.grew = make(chan struct{})
}

// SetBatches makes a partition's log hold exactly batches (as a
// compaction, or a transaction's markers, would leave it), its end after
// the last of them.
func (s *Storage) SetBatches(topic string, partition int32, batches ...record.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logLocked(tp{topic, partition})
	l.batches = nil
	for _, b := range batches {
		l.batches = append(l.batches, append(record.Batch(nil), b...))
		l.leo = int64(b.NextOffset())
	}
	close(l.grew)
	l.grew = make(chan struct{})
}

// Batches returns copies of the batches a partition holds on this node.
func (s *Storage) Batches(topic string, partition int32) []record.Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []record.Batch
	if l := s.logs[tp{topic, partition}]; l != nil {
		for _, b := range l.batches {
			out = append(out, append(record.Batch(nil), b...))
		}
	}
	return out
}

// SetLogStart moves a partition's log start (as retention would).
func (s *Storage) SetLogStart(topic string, partition int32, offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logLocked(tp{topic, partition})
	l.logStart = offset
	if l.leo < offset {
		l.leo = offset
	}
}

// SetFollowerLEO sets the log end offset this node, as the partition's
// leader, reports for a follower in ListOffsets answers (the fake does not
// replicate, so followers have no LEO unless told).
func (s *Storage) SetFollowerLEO(topic string, partition, replica int32, leo int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logLocked(tp{topic, partition})
	if l.followerLEO == nil {
		l.followerLEO = map[int32]int64{}
	}
	l.followerLEO[replica] = leo
}

// Fetches returns the fetch requests received so far.
func (s *Storage) Fetches() []*storagev1.FetchRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*storagev1.FetchRequest(nil), s.fetches...)
}

// Follows answers the Follow streams opened on this node, in order.
func (s *Storage) Follows() []*storagev1.FollowRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*storagev1.FollowRequest(nil), s.follows...)
}

// FollowSent answers the bytes of batches Follow streams have sent.
func (s *Storage) FollowSent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.followSent
}

// FollowSending answers the bytes of batches Follow streams have begun to
// send: unlike FollowSent, it already counts every batch a reader has had.
func (s *Storage) FollowSending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.followSending
}

// FollowOpen counts the Follow streams this node serves now: a stream the
// reader ended counts until the node has seen it end.
func (s *Storage) FollowOpen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.followOpen
}

// ProduceStreams counts the ProduceStream calls opened on this node.
func (s *Storage) ProduceStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams
}

func (s *Storage) logLocked(k tp) *partitionLog {
	l := s.logs[k]
	if l == nil {
		l = &partitionLog{grew: make(chan struct{}), seqs: map[int64][]writtenBatch{}, epochs: map[int64]int16{}}
		s.logs[k] = l
	}
	return l
}

// leads checks that this node leads the partition at the epoch the client
// believes current.
func (s *Storage) leads(topic string, partition, clientEpoch int32) error {
	leader, epoch, ok := s.ctrl.Leader(topic, partition)
	switch {
	case !ok:
		return errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s-%d", topic, partition)
	case leader != s.ID:
		return errs.Errorf(errs.NotLeaderOrFollower, "node %d does not lead %s-%d (node %d does)", s.ID, topic, partition, leader)
	case clientEpoch >= 0 && clientEpoch < epoch:
		return errs.Errorf(errs.FencedLeaderEpoch, "epoch %d is older than %d", clientEpoch, epoch)
	case clientEpoch > epoch:
		return errs.Errorf(errs.UnknownLeaderEpoch, "epoch %d is newer than %d", clientEpoch, epoch)
	}
	return nil
}

// Named counts the principals produce requests, fetches and follow streams
// named for the clients they were made for, keyed "produce:User:x",
// "fetch:User:x" and "follow:User:x".
func (s *Storage) Named() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.named)
}

func (s *Storage) produce(req *storagev1.ProduceRequest) (*storagev1.ProduceResponse, map[tp][]int) {
	if p := req.GetPrincipal(); p != "" {
		s.mu.Lock()
		s.named["produce:"+p]++
		s.mu.Unlock()
	}
	resp := &storagev1.ProduceResponse{}
	idx := map[tp][]int{}
	for _, pp := range req.GetPartitions() {
		k := tp{pp.GetTopic(), pp.GetPartition()}
		s.mu.Lock()
		before := len(s.logLocked(k).batches)
		s.mu.Unlock()
		base, err := s.append(pp)
		s.mu.Lock()
		if err == nil && len(s.logLocked(k).batches) > before {
			idx[k] = append(idx[k], s.noteAppendedLocked(k))
		}
		s.mu.Unlock()
		r := &storagev1.PartitionProduceResult{Topic: pp.GetTopic(), Partition: pp.GetPartition(), BaseOffset: base, LogAppendTimeMs: -1}
		if err != nil {
			r.ErrorCode, r.ErrorMessage, r.BaseOffset = skeinv1.ErrorCode(errs.CodeOf(err)), errs.Message(err), -1
			s.mu.Lock()
			s.refused[errs.Of(err).Name]++
			s.mu.Unlock()
		}
		resp.Partitions = append(resp.Partitions, r)
	}
	return resp, idx
}

// Refused counts the produce attempts this node refused with the named error.
func (s *Storage) Refused(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[name]
}

func (s *Storage) append(pp *storagev1.PartitionProduce) (int64, error) {
	if err := s.leads(pp.GetTopic(), pp.GetPartition(), pp.GetCurrentLeaderEpoch()); err != nil {
		return -1, err
	}
	k := tp{pp.GetTopic(), pp.GetPartition()}
	cfg, _ := s.ctrl.TopicConfig(k.topic)
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.fail[k]; len(q) > 0 && len(s.failAfter[k]) == 0 {
		s.fail[k] = q[1:]
		return -1, q[0]
	}
	l := s.logLocked(k)
	it := record.NewBatchIter(pp.GetRecords())
	var batches []record.Batch
	for it.Next() {
		b := append(record.Batch(nil), it.Batch()...)
		if err := b.Verify(); err != nil {
			return -1, err
		}
		if b.Size() > int(cfg.MaxMessageBytes) {
			return -1, errs.Errorf(errs.MessageTooLarge, "batch of %d bytes is above max.message.bytes %d", b.Size(), cfg.MaxMessageBytes)
		}
		var ri record.RecordIter
		if err := record.ValidateRecords(&ri, b, record.ValidateOptions{Strict: true}); err != nil {
			return -1, err
		}
		batches = append(batches, b)
	}
	if err := it.Err(); err != nil {
		return -1, err
	}
	if len(batches) == 0 {
		return -1, errs.Errorf(errs.CorruptMessage, "no batch in the request")
	}
	first := int64(-1)
	for _, b := range batches {
		if pid := b.ProducerID(); pid >= 0 {
			_, known := l.epochs[pid]
			if e, ok := l.epochs[pid]; ok && b.ProducerEpoch() < e {
				return -1, errs.Errorf(errs.InvalidProducerEpoch, "producer %d: epoch %d is older than the current %d", pid, b.ProducerEpoch(), e)
			} else if !ok || b.ProducerEpoch() > e {
				l.epochs[pid] = b.ProducerEpoch()
				delete(l.seqs, pid) // a new epoch starts its sequences at 0
			}
			seqs := l.seqs[pid]
			for _, w := range seqs {
				if w.baseSeq == b.BaseSequence() && w.lastSeq == b.LastSequence() {
					return w.baseOffset, nil // a duplicate: the original offsets
				}
			}
			want := int32(0)
			if len(seqs) > 0 {
				want = seqs[len(seqs)-1].lastSeq + 1
			}
			if b.BaseSequence() != want {
				if !known {
					return -1, errs.Errorf(errs.UnknownProducerID, "producer %d is not known here: its first batch must start at sequence 0, got %d", pid, b.BaseSequence())
				}
				return -1, errs.Errorf(errs.OutOfOrderSequenceNumber, "producer %d: sequence %d, expected %d", pid, b.BaseSequence(), want)
			}
			l.seqs[pid] = append(seqs, writtenBatch{b.BaseSequence(), b.LastSequence(), l.leo})
		}
		b.SetBaseOffset(record.Offset(l.leo))
		if first < 0 {
			first = l.leo
		}
		l.batches = append(l.batches, b)
		l.leo = int64(b.NextOffset())
	}
	close(l.grew)
	l.grew = make(chan struct{})
	if q := s.failAfter[k]; len(q) > 0 {
		s.failAfter[k] = q[1:]
		return -1, q[0]
	}
	return first, nil
}

// Produce appends batches and answers per partition.
func (s *Storage) Produce(_ context.Context, req *storagev1.ProduceRequest) (*storagev1.ProduceResponse, error) {
	resp, idx := s.produce(req)
	s.noteAnswered(idx)
	return resp, nil
}

// ProduceStream answers each request by correlation id; acks=0 requests get
// no answer.
func (s *Storage) ProduceStream(stream storagev1.StorageService_ProduceStreamServer) error {
	s.mu.Lock()
	s.streams++
	s.mu.Unlock()
	var sendMu sync.Mutex
	send := func(m *storagev1.ProduceStreamResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		s.waitStall(stream.Context())
		hold := s.holdFor(req.GetRequest())
		resp, idx := s.produce(req.GetRequest())
		if req.GetRequest().GetAcks() == 0 {
			s.noteAnswered(idx)
			continue
		}
		m := &storagev1.ProduceStreamResponse{CorrelationId: req.GetCorrelationId(), Response: resp}
		if hold != nil {
			go func() {
				select {
				case <-hold:
					s.noteAnswered(idx)
					_ = send(m)
				case <-stream.Context().Done():
				}
			}()
			continue
		}
		s.noteAnswered(idx)
		if err := send(m); err != nil {
			return err
		}
	}
}

// Fetch answers batches from the fetch offset, long-polling at the log end.
func (s *Storage) Fetch(ctx context.Context, req *storagev1.FetchRequest) (*storagev1.FetchResponse, error) {
	s.waitStall(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.fetches = append(s.fetches, req)
	md, _ := metadata.FromIncomingContext(ctx)
	if p, named, err := peerauth.PrincipalIn(md, peerauth.PrincipalMD); named && err == nil {
		s.named["fetch:"+p]++
	}
	s.mu.Unlock()
	resp := &storagev1.FetchResponse{}
	deadline := time.Now().Add(time.Duration(req.GetMaxWaitMs()) * time.Millisecond)
	for _, pf := range req.GetPartitions() {
		resp.Partitions = append(resp.Partitions, s.fetchOne(ctx, pf, req.GetMaxBytes(), deadline))
	}
	return resp, nil
}

// Follow streams a partition's batches from the asked offset as they are
// appended, until the caller leaves or this node stops leading it (then
// with the error status a real node ends with).
func (s *Storage) Follow(req *storagev1.FollowRequest, stream storagev1.StorageService_FollowServer) error {
	ctx := stream.Context()
	s.waitStall(ctx)
	s.mu.Lock()
	s.followOpen++
	defer func() {
		s.mu.Lock()
		s.followOpen--
		s.mu.Unlock()
	}()
	s.follows = append(s.follows, req)
	md, _ := metadata.FromIncomingContext(ctx)
	if p, named, err := peerauth.PrincipalIn(md, peerauth.PrincipalMD); named && err == nil {
		s.named["follow:"+p]++
	}
	s.mu.Unlock()
	maxBytes := req.GetMaxBytes()
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	pf := &storagev1.PartitionFetch{Topic: req.GetTopic(), Partition: req.GetPartition(), FetchOffset: req.GetFetchOffset(), CurrentLeaderEpoch: req.GetCurrentLeaderEpoch()}
	for ctx.Err() == nil {
		// A short long poll, so that a leader change is seen soon.
		r := s.fetchOne(ctx, pf, maxBytes, time.Now().Add(100*time.Millisecond))
		if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
			return rpcerr.ToGRPC(errs.Errorf(errs.ForCode(errs.Code(r.GetErrorCode())), "%s", r.GetErrorMessage()))
		}
		if len(r.GetRecords()) == 0 {
			continue
		}
		var last record.Batch
		for it := record.NewBatchIter(r.GetRecords()); it.Next(); {
			last = it.Batch()
		}
		s.mu.Lock()
		s.followSending += len(r.GetRecords())
		s.mu.Unlock()
		if err := stream.Send(&storagev1.FollowResponse{Partition: r}); err != nil {
			return nil
		}
		s.mu.Lock()
		s.followSent += len(r.GetRecords())
		s.mu.Unlock()
		pf.FetchOffset = int64(last.NextOffset())
	}
	return nil
}

func (s *Storage) fetchOne(ctx context.Context, pf *storagev1.PartitionFetch, maxBytes int32, deadline time.Time) *storagev1.PartitionFetchResult {
	r := &storagev1.PartitionFetchResult{Topic: pf.GetTopic(), Partition: pf.GetPartition()}
	if err := s.leads(pf.GetTopic(), pf.GetPartition(), pf.GetCurrentLeaderEpoch()); err != nil {
		r.ErrorCode, r.ErrorMessage = skeinv1.ErrorCode(errs.CodeOf(err)), errs.Message(err)
		return r
	}
	k := tp{pf.GetTopic(), pf.GetPartition()}
	for {
		s.mu.Lock()
		l := s.logLocked(k)
		r.HighWatermark, r.LastStableOffset, r.LogStartOffset = l.leo, l.leo, l.logStart
		off := pf.GetFetchOffset()
		if off < l.logStart || off > l.leo {
			s.mu.Unlock()
			r.ErrorCode = skeinv1.ErrorCode_OFFSET_OUT_OF_RANGE
			r.ErrorMessage = errs.Message(errs.Errorf(errs.OffsetOutOfRange, "offset %d is outside [%d, %d]", off, l.logStart, l.leo))
			return r
		}
		for _, b := range l.batches {
			if int64(b.NextOffset()) <= off {
				continue
			}
			if len(r.Records) > 0 && len(r.Records)+len(b) > int(maxBytes) {
				break
			}
			r.Records = append(r.Records, b...)
		}
		grew := l.grew
		s.mu.Unlock()
		wait := time.Until(deadline)
		if len(r.Records) > 0 || wait <= 0 {
			return r
		}
		t := time.NewTimer(wait)
		select {
		case <-grew:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return r
		}
	}
}

// ListOffsets answers the log start, the HW, or the first offset at or after
// a timestamp.
func (s *Storage) ListOffsets(_ context.Context, req *storagev1.ListOffsetsRequest) (*storagev1.ListOffsetsResponse, error) {
	resp := &storagev1.ListOffsetsResponse{}
	for _, lp := range req.GetPartitions() {
		r := &storagev1.ListOffsetsResult{Topic: lp.GetTopic(), Partition: lp.GetPartition(), Timestamp: -1}
		if err := s.leads(lp.GetTopic(), lp.GetPartition(), lp.GetCurrentLeaderEpoch()); err != nil {
			r.ErrorCode, r.ErrorMessage, r.Offset = skeinv1.ErrorCode(errs.CodeOf(err)), errs.Message(err), -1
			resp.Partitions = append(resp.Partitions, r)
			continue
		}
		s.mu.Lock()
		if q := s.failList[tp{lp.GetTopic(), lp.GetPartition()}]; len(q) > 0 {
			s.failList[tp{lp.GetTopic(), lp.GetPartition()}] = q[1:]
			s.mu.Unlock()
			r.ErrorCode, r.ErrorMessage, r.Offset = skeinv1.ErrorCode(errs.CodeOf(q[0])), errs.Message(q[0]), -1
			resp.Partitions = append(resp.Partitions, r)
			continue
		}
		l := s.logLocked(tp{lp.GetTopic(), lp.GetPartition()})
		r.ReplicaOffsets = []*storagev1.ReplicaLogEnd{{Replica: s.ID, LogEndOffset: l.leo}}
		for id, leo := range l.followerLEO {
			if id != s.ID {
				r.ReplicaOffsets = append(r.ReplicaOffsets, &storagev1.ReplicaLogEnd{Replica: id, LogEndOffset: leo})
			}
		}
		slices.SortFunc(r.ReplicaOffsets, func(a, b *storagev1.ReplicaLogEnd) int { return int(a.GetReplica()) - int(b.GetReplica()) })
		switch ts := lp.GetTimestamp(); ts {
		case -1:
			r.Offset = l.leo
		case -2:
			r.Offset = l.logStart
		default:
			r.Offset = -1
		search:
			for _, b := range l.batches {
				var ri record.RecordIter
				if ri.Reset(b) != nil {
					continue
				}
				for ri.Next() {
					if ri.Timestamp() >= ts {
						r.Offset, r.Timestamp = int64(ri.Offset()), ri.Timestamp()
						break search
					}
				}
			}
		}
		s.mu.Unlock()
		resp.Partitions = append(resp.Partitions, r)
	}
	return resp, nil
}
