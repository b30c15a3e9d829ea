package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"skein/loadtest/internal/hist"
)

// RawResult is one raw-limit measurement of the machine.
type RawResult struct {
	Mode       string  `json:"mode"`
	Detail     string  `json:"detail"`
	Bytes      int64   `json:"bytes"`
	ElapsedSec float64 `json:"elapsed_s"`
	MiBPerS    float64 `json:"mib_per_s"`
	// OpsPerS: writes per second (disk) or round trips per second (tcp rtt).
	OpsPerS float64 `json:"ops_per_s,omitempty"`
	// Latency of each fsync (disk) or round trip (tcp rtt).
	Latency *Latency `json:"latency_ms,omitempty"`
}

func (r RawResult) String() string {
	out := fmt.Sprintf("%s (%s): %d bytes in %.2fs: %.2f MiB/s", r.Mode, r.Detail, r.Bytes, r.ElapsedSec, r.MiBPerS)
	if r.OpsPerS > 0 {
		out += fmt.Sprintf(", %.0f ops/s", r.OpsPerS)
	}
	if l := r.Latency; l != nil {
		out += fmt.Sprintf("\n  latency ms: mean %.3f p50 %.3f p99 %.3f max %.3f", l.Mean, l.P50, l.P99, l.Max)
	}
	return out
}

// DiskWrite writes size bytes sequentially to a new file in dir, block
// bytes per write, with an fsync (f.Sync, as libs/log flushes a segment)
// after every fsyncEvery bytes, as a log appender with a flush policy
// does; the file is removed afterwards.
func DiskWrite(dir string, size, block, fsyncEvery int64) (RawResult, error) {
	if block <= 0 || size <= 0 || fsyncEvery <= 0 {
		return RawResult{}, errors.New("size, block and fsync interval must be positive")
	}
	f, err := os.CreateTemp(dir, "skein-bench-disk-*")
	if err != nil {
		return RawResult{}, err
	}
	name := f.Name()
	defer os.Remove(name)
	defer f.Close()
	buf := Payload(nil, int(block), time.Now())
	h := hist.New()
	var written, sinceSync int64
	start := time.Now()
	for written < size {
		n, err := f.Write(buf[:min(block, size-written)])
		if err != nil {
			return RawResult{}, err
		}
		written += int64(n)
		sinceSync += int64(n)
		if sinceSync >= fsyncEvery || written >= size {
			t0 := time.Now()
			if err := f.Sync(); err != nil {
				return RawResult{}, err
			}
			h.RecordDuration(time.Since(t0), 1)
			sinceSync = 0
		}
	}
	el := time.Since(start).Seconds()
	lat := latencyOf(h)
	return RawResult{Mode: "disk", Detail: fmt.Sprintf("sequential %d-byte writes, fsync every %d bytes, in %s", block, fsyncEvery, filepath.Dir(name)),
		Bytes: written, ElapsedSec: el, MiBPerS: float64(written) / el / (1 << 20), OpsPerS: float64(h.Count()) / el, Latency: &lat}, nil
}

// TCPStream sends size bytes over one loopback TCP connection in block-byte
// writes to a reader that discards them: the most a single stream can move
// through the kernel on this machine.
func TCPStream(size, block int64) (RawResult, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return RawResult{}, err
	}
	defer lis.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
		got <- n
	}()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		return RawResult{}, err
	}
	buf := Payload(nil, int(block), time.Now())
	start := time.Now()
	var sent int64
	for sent < size {
		n, err := c.Write(buf[:min(block, size-sent)])
		if err != nil {
			c.Close()
			return RawResult{}, err
		}
		sent += int64(n)
	}
	c.Close()
	n := <-got
	el := time.Since(start).Seconds()
	if n != sent {
		return RawResult{}, fmt.Errorf("sent %d bytes, the reader got %d", sent, n)
	}
	return RawResult{Mode: "tcp-stream", Detail: fmt.Sprintf("one loopback connection, %d-byte writes", block),
		Bytes: sent, ElapsedSec: el, MiBPerS: float64(sent) / el / (1 << 20)}, nil
}

// TCPRoundTrip sends count messages of size bytes over one loopback
// connection, each echoed back before the next: the floor under any
// request/response latency on this machine.
func TCPRoundTrip(count int, size int) (RawResult, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return RawResult{}, err
	}
	defer lis.Close()
	go func() {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		return RawResult{}, err
	}
	defer c.Close()
	msg := Payload(nil, size, time.Now())
	back := make([]byte, size)
	h := hist.New()
	start := time.Now()
	for range count {
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			return RawResult{}, err
		}
		if _, err := io.ReadFull(c, back); err != nil {
			return RawResult{}, err
		}
		h.RecordDuration(time.Since(t0), 1)
	}
	el := time.Since(start).Seconds()
	lat := latencyOf(h)
	return RawResult{Mode: "tcp-rtt", Detail: fmt.Sprintf("one loopback connection, %d-byte ping-pong", size),
		Bytes: int64(count) * int64(size) * 2, ElapsedSec: el, MiBPerS: float64(count*size*2) / el / (1 << 20),
		OpsPerS: float64(count) / el, Latency: &lat}, nil
}
