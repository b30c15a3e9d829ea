package record

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// No codec makes more of any input than MaxCompressedLen says, the input
// least compressible (random bytes) above all; and a batch filled up to
// MaxBatchBeforeCompression compresses within its limit.
func TestMaxCompressedLenBoundsEveryCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, 10, 100, 500, 939, 1000, 4096, 16 << 10, 32<<10 + 1, 65 << 10, 200 << 10, 1 << 20}
	for _, c := range []Compression{None, Gzip, Snappy, LZ4, Zstd} {
		for _, n := range sizes {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			out, err := Compress(nil, src, c)
			if err != nil {
				t.Fatal(err)
			}
			if bound := MaxCompressedLen(n, c); len(out) > bound {
				t.Errorf("%v of %d random bytes: %d bytes, above the bound %d", c, n, len(out), bound)
			}
		}
	}
}

// Inputs gzip's Huffman coding makes larger than storing them would (a
// header larger than the encoder's estimate of it): Compress stores them,
// within the bound.
func TestGzipStaysWithinItsBound(t *testing.T) {
	for _, name := range []string{"gzip-grows-520.bin", "gzip-grows-834.bin"} {
		src, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		out, err := Compress([]byte("prefix"), src, Gzip)
		if err != nil {
			t.Fatal(err)
		}
		if got, bound := len(out)-len("prefix"), MaxCompressedLen(len(src), Gzip); got > bound {
			t.Errorf("%s: %d bytes gzipped, above the bound %d", name, got, bound)
		}
		back, err := Decompress(nil, out[len("prefix"):], Gzip, 1<<20)
		if err != nil || string(back) != string(src) {
			t.Errorf("%s: does not decompress to what was compressed: %v", name, err)
		}
	}
}

func TestMaxBatchBeforeCompression(t *testing.T) {
	for _, c := range []Compression{None, Gzip, Snappy, LZ4, Zstd} {
		for _, limit := range []int{HeaderSize, HeaderSize + 1, 100, 1000, 1 << 20, 8 << 20} {
			got := MaxBatchBeforeCompression(limit, c)
			if got > limit || got < HeaderSize {
				t.Errorf("%v, limit %d: %d", c, limit, got)
				continue
			}
			if got > HeaderSize && HeaderSize+MaxCompressedLen(got-HeaderSize, c) > limit {
				t.Errorf("%v, limit %d: a batch of %d may compress past the limit", c, limit, got)
			}
			if c == None && got != limit {
				t.Errorf("uncompressed, limit %d: %d, want the limit itself", limit, got)
			}
			// Not much below what fits: within the bound's slack of one more byte.
			if next := got - HeaderSize + 1; got < limit && HeaderSize+MaxCompressedLen(next, c) <= limit {
				t.Errorf("%v, limit %d: %d, but %d records bytes fit", c, limit, got, next)
			}
		}
	}
}
