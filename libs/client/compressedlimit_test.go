package client_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"skein/libs/client"
)

// incompressible answers n random bytes: what a codec makes larger.
func incompressible(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// On a compressed topic the leader checks max.message.bytes on the batch
// as compressed, which for values a codec cannot compress is a little
// larger than the records: batches are filled only up to what is certain
// to fit, so records that each fit are written, never refused together.
func TestBatchesOfACompressedTopicFitOnceCompressed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			cl, _, _, c := txnSetup(t, 1)
			topic := "packed-" + codec
			createTopic(t, c, topic, 1, map[string]string{"max.message.bytes": "1000", "compression.type": codec})
			var recs []client.Record
			for range 12 {
				recs = append(recs, client.Record{Topic: topic, Partition: ptr(int32(0)), Value: incompressible(rng, 225)})
			}

			p := c.NewProducer(client.WithLinger(50 * time.Millisecond))
			defer p.Close(ctx(t))
			for i, r := range p.ProduceSync(ctx(t), recs...) {
				if r.Err != nil {
					t.Fatalf("producer, record %d of %d bytes: %v", i, len(recs[i].Value), r.Err)
				}
			}

			tp, err := c.NewTransactionalProducer(ctx(t), "tx-"+codec)
			if err != nil {
				t.Fatal(err)
			}
			defer tp.Close()
			if err := tp.Begin(); err != nil {
				t.Fatal(err)
			}
			if _, err := tp.Send(ctx(t), recs...); err != nil {
				t.Fatalf("transactional producer: %v", err)
			}
			if err := tp.Commit(ctx(t)); err != nil {
				t.Fatal(err)
			}
			batches := cl.Storage[1].Batches(topic, 0)
			records := 0
			for _, b := range batches {
				if len(b) > 1000 {
					t.Errorf("a batch of %d bytes was written past max.message.bytes", len(b))
				}
				if !b.IsControl() {
					records += int(b.RecordCount())
				}
			}
			if records != 2*len(recs) {
				t.Fatalf("%d records in %d batches, want %d", records, len(batches), 2*len(recs))
			}
		})
	}
}
