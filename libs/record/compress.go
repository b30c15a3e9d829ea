package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"skein/libs/errs"
)

// Compression is a Kafka compression codec id, stored in attribute bits 0-2.
type Compression int8

const (
	None   Compression = 0
	Gzip   Compression = 1
	Snappy Compression = 2
	LZ4    Compression = 3
	Zstd   Compression = 4
)

// Valid reports whether c is one of Kafka's codecs.
func (c Compression) Valid() bool { return c >= None && c <= Zstd }

func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// ParseCompression maps Kafka's compression.type names to a codec.
// "uncompressed" and "none" are both accepted.
func ParseCompression(name string) (Compression, error) {
	switch name {
	case "none", "uncompressed":
		return None, nil
	case "gzip":
		return Gzip, nil
	case "snappy":
		return Snappy, nil
	case "lz4":
		return LZ4, nil
	case "zstd":
		return Zstd, nil
	}
	return 0, errs.Errorf(errs.UnsupportedCompressionType, "unknown compression type %q", name)
}

// Pools: encoders and decoders are expensive to build (zstd's especially),
// so they are reused; each is used by one goroutine at a time.
var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	gzipStoring = sync.Pool{New: func() any {
		w, err := gzip.NewWriterLevel(nil, gzip.NoCompression)
		if err != nil {
			panic(err) // a valid level; cannot fail
		}
		return w
	}}
	gzipReaders sync.Pool // *gzip.Reader; Reset needs a valid header, so no New
	lz4Writers  = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// 64 KiB blocks are what Kafka's Java KafkaLZ4BlockOutputStream writes.
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		return w
	}}
	lz4Readers   = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	zstdEncoders = sync.Pool{New: func() any {
		// The same options franz-go uses: a modest window keeps both the
		// encoder's and every consumer's memory small, and zero frames
		// keeps empty inputs decodable by strict decoders.
		e, err := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		if err != nil {
			panic(err) // static options; cannot fail
		}
		return e
	}}
	zstdDecoders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(maxZstdMemory))
		if err != nil {
			panic(err) // static options; cannot fail
		}
		return d
	}}
)

// maxZstdMemory bounds what any zstd frame may ask the decoder to allocate;
// the per-call limit is checked on the output as well.
const maxZstdMemory = 1 << 30

// xerialMagic starts the snappy framing of Java's xerial snappy-java
// SnappyOutputStream, which Kafka's Java clients write: the 8-byte magic,
// version 1 and minimum compatible version 1, then blocks of
// (int32 big endian compressed length, raw snappy block).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialBlockSize = 32 << 10 // Java's default block size

// Compress appends src compressed with c to dst.
func Compress(dst, src []byte, c Compression) ([]byte, error) {
	switch c {
	case None:
		return append(dst, src...), nil
	case Gzip:
		out, err := streamTo(dst, src, &gzipWriters)
		if err == nil && len(out)-len(dst) > MaxCompressedLen(len(src), Gzip) {
			// The encoder chose Huffman codes on an estimate of their
			// header's size, which some inputs make larger than storing
			// them: store them, within the bound a producer sized its
			// batch by.
			out, err = streamTo(out[:len(dst)], src, &gzipStoring)
		}
		return out, err
	case Snappy:
		dst = append(dst, xerialMagic...)
		dst = binary.BigEndian.AppendUint32(dst, 1)
		dst = binary.BigEndian.AppendUint32(dst, 1)
		for len(src) > 0 {
			n := min(len(src), xerialBlockSize)
			at := len(dst)
			need := 4 + s2.MaxEncodedLen(n)
			if cap(dst)-at < need {
				grown := make([]byte, at, at+need+(at>>2))
				copy(grown, dst)
				dst = grown
			}
			block := s2.EncodeSnappy(dst[at+4:at+need], src[:n])
			binary.BigEndian.PutUint32(dst[at:at+4], uint32(len(block)))
			dst = dst[:at+4+len(block)]
			src = src[n:]
		}
		return dst, nil
	case LZ4:
		return streamTo(dst, src, &lz4Writers)
	case Zstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(src, dst), nil
	}
	return dst, errs.Errorf(errs.UnsupportedCompressionType, "compression codec %d", int(c))
}

// streamWriter is a pooled compressing writer (gzip's, lz4's).
type streamWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// streamTo appends src compressed by a writer of pool to dst.
func streamTo(dst, src []byte, pool *sync.Pool) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	w := pool.Get().(streamWriter)
	defer pool.Put(w)
	w.Reset(buf)
	if _, err := w.Write(src); err != nil {
		return dst, err
	}
	if err := w.Close(); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

var errTooLarge = errors.New("decompressed size exceeds the limit")

// Decompress appends the decompression of src to dst. It fails with
// MESSAGE_TOO_LARGE once the output would pass limit bytes, so that a small
// batch cannot inflate into an unbounded allocation, and with CORRUPT_MESSAGE
// when src does not decode.
func Decompress(dst, src []byte, c Compression, limit int) ([]byte, error) {
	out, err := decompress(dst, src, c, limit)
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, errTooLarge), errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return dst, errs.Errorf(errs.MessageTooLarge, "%s records decompress to more than %d bytes", c, limit)
	case errs.Of(err) != errs.UnknownServerError:
		return dst, err
	default:
		return dst, errs.Errorf(errs.CorruptMessage, "%s records do not decompress: %v", c, err)
	}
}

func decompress(dst, src []byte, c Compression, limit int) ([]byte, error) {
	start := len(dst)
	switch c {
	case None:
		if len(src) > limit {
			return dst, errTooLarge
		}
		return append(dst, src...), nil
	case Gzip:
		var r *gzip.Reader
		if v := gzipReaders.Get(); v != nil {
			r = v.(*gzip.Reader)
			if err := r.Reset(bytes.NewReader(src)); err != nil {
				gzipReaders.Put(r)
				return dst, err
			}
		} else {
			var err error
			if r, err = gzip.NewReader(bytes.NewReader(src)); err != nil {
				return dst, err
			}
		}
		defer gzipReaders.Put(r)
		return readAllLimited(dst, r, limit)
	case Snappy:
		if len(src) >= 16 && bytes.Equal(src[:8], xerialMagic) {
			return decodeXerial(dst, src[16:], limit)
		}
		return decodeSnappyBlock(dst, src, limit-(len(dst)-start))
	case LZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(src))
		return readAllLimited(dst, r, limit)
	case Zstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		// Reject frames that declare a large size before allocating for them.
		var h zstd.Header
		if err := h.Decode(src); err == nil && h.HasFCS && h.FrameContentSize > uint64(limit) {
			return dst, errTooLarge
		}
		out, err := d.DecodeAll(src, dst)
		if err != nil {
			return dst, err
		}
		if len(out)-start > limit {
			return dst, errTooLarge
		}
		return out, nil
	}
	return dst, errs.Errorf(errs.UnsupportedCompressionType, "compression codec %d", int(c))
}

func decodeSnappyBlock(dst, src []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n > limit {
		return dst, errTooLarge
	}
	at := len(dst)
	dst = grow(dst, n)
	if _, err := s2.Decode(dst[at:at+n], src); err != nil {
		return dst[:at], err
	}
	return dst[:at+n], nil
}

func decodeXerial(dst, src []byte, limit int) ([]byte, error) {
	start := len(dst)
	for len(src) > 0 {
		if len(src) < 4 {
			return dst, errors.New("xerial: truncated block length")
		}
		n := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if n < 0 || n > len(src) {
			return dst, errors.New("xerial: block length past the end")
		}
		var err error
		if dst, err = decodeSnappyBlock(dst, src[:n], limit-(len(dst)-start)); err != nil {
			return dst, err
		}
		src = src[n:]
	}
	return dst, nil
}

// readAllLimited appends r's output to dst, failing past limit bytes.
func readAllLimited(dst []byte, r io.Reader, limit int) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst)-start > limit {
			return dst[:start], errTooLarge
		}
		if cap(dst)-len(dst) < 4096 {
			dst = grow(dst, 32<<10)
		}
		// Never read more than one byte past the limit: enough to notice it.
		room := min(cap(dst)-len(dst), limit-(len(dst)-start)+1)
		n, err := r.Read(dst[len(dst) : len(dst)+room])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			if len(dst)-start > limit {
				return dst[:start], errTooLarge
			}
			return dst, nil
		}
		if err != nil {
			return dst[:start], err
		}
	}
}

// grow makes room for n more bytes after len(b).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	out := make([]byte, len(b), len(b)+n+cap(b)/2)
	copy(out, b)
	return out
}

// MaxCompressedLen bounds the size of n bytes compressed with c: what a
// codec makes of input it cannot compress (random bytes, or bytes
// compressed already) is a little larger than the input.
func MaxCompressedLen(n int, c Compression) int {
	switch c {
	case Gzip:
		// Stored deflate blocks (Compress falls back to them): 5 bytes
		// each, a block at most every 16 KiB of input; 18 bytes of gzip
		// header and trailer.
		return n + 5*(n/(16<<10)+2) + 18
	case Snappy:
		// The xerial header, then per 32 KiB block its length and the
		// snappy block's own bound.
		full, rest := n/xerialBlockSize, n%xerialBlockSize
		out := len(xerialMagic) + 8 + full*(4+s2.MaxEncodedLen(xerialBlockSize))
		if rest > 0 {
			out += 4 + s2.MaxEncodedLen(rest)
		}
		return out
	case LZ4:
		// A frame header of at most 19 bytes, per 64 KiB block its 4-byte
		// length (an incompressible block is stored as it is), an end mark
		// and a content checksum.
		return n + 4*(n/(64<<10)+1) + 19 + 8
	case Zstd:
		// zstd's own bound (ZSTD_COMPRESSBOUND), and a frame header.
		bound := n + n>>8
		if n < 128<<10 {
			bound += (128<<10 - n) >> 11
		}
		return bound + 18
	}
	return n
}

// MaxBatchBeforeCompression is the largest batch, measured before its
// records are compressed with c, that is certain to be at most limit bytes
// once they are: what a producer fills its batches up to under a topic's
// max.message.bytes, which the leader checks on the compressed batch.
func MaxBatchBeforeCompression(limit int, c Compression) int {
	if c == None || limit <= HeaderSize {
		return max(limit, HeaderSize)
	}
	// The most records bytes whose bound fits (the bound grows with them).
	lo, hi := 0, limit-HeaderSize
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if HeaderSize+MaxCompressedLen(mid, c) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return HeaderSize + lo
}
