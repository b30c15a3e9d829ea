package log

// The leader-epoch cache maps each leader epoch to the first offset written in
// it (KIP-101). It lives in one small text file in the partition directory,
// Kafka's leader-epoch-checkpoint format:
//
//	| line | content               | example |
//	|------|-----------------------|---------|
//	| 1    | version               | 0       |
//	| 2    | number of entries (n) | 2       |
//	| 3..  | epoch startOffset     | 0 0     |
//	|      |                       | 3 1200  |
//
// It is rewritten whole (temp file, fsync, rename, fsync dir) on every
// change; changes are rare (a leader change, a truncation).

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"skein/libs/durable"
	"skein/libs/record"
)

const epochFile = "leader-epoch-checkpoint"

// UndefinedEpoch and UndefinedOffset are Kafka's answers when nothing is known.
const (
	UndefinedEpoch  Epoch  = -1
	UndefinedOffset Offset = -1
)

// EpochEntry is one row of the leader-epoch cache.
type EpochEntry struct {
	Epoch       Epoch
	StartOffset Offset
}

// epochCache keeps entries with strictly increasing epochs and
// non-decreasing start offsets.
type epochCache struct {
	entries []EpochEntry
}

func (c *epochCache) latest() (EpochEntry, bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign records that epoch starts at offset, if epoch is newer than every
// known one. It reports whether the cache changed.
func (c *epochCache) assign(epoch Epoch, offset Offset) bool {
	if epoch < 0 {
		return false
	}
	if l, ok := c.latest(); ok {
		if epoch <= l.Epoch {
			return false
		}
		offset = max(offset, l.StartOffset)
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: offset})
	return true
}

// endOffsetFor is KIP-101/279's answer for OffsetForLeaderEpoch: the largest
// epoch <= requested and the offset where the next epoch starts (the LEO for
// the latest epoch).
func (c *epochCache) endOffsetFor(requested Epoch, leo Offset) (Epoch, Offset) {
	l, ok := c.latest()
	if requested < 0 || !ok {
		return UndefinedEpoch, UndefinedOffset
	}
	if requested == l.Epoch {
		return requested, leo
	}
	// The first entry with an epoch above the requested one.
	i := 0
	for i < len(c.entries) && c.entries[i].Epoch <= requested {
		i++
	}
	if i == len(c.entries) {
		// Newer than anything here: this replica cannot say.
		return UndefinedEpoch, UndefinedOffset
	}
	if i == 0 {
		// Older than every epoch here: Kafka answers with the requested
		// epoch and where the first known epoch starts.
		return requested, c.entries[0].StartOffset
	}
	return c.entries[i-1].Epoch, c.entries[i].StartOffset
}

// truncateFromEnd drops entries that start at or after offset (the log was
// truncated there).
func (c *epochCache) truncateFromEnd(offset Offset) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= offset {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart forgets what lies before the log start offset, keeping
// the epoch that covers it, moved up to start there.
func (c *epochCache) truncateFromStart(offset Offset) bool {
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= offset {
		i++
	}
	if i == 0 {
		return false
	}
	keep := c.entries[i-1]
	if i == 1 && keep.StartOffset == offset {
		return false
	}
	keep.StartOffset = offset
	c.entries = append([]EpochEntry{keep}, c.entries[i:]...)
	return true
}

func (c *epochCache) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

func decodeEpochs(data []byte) (epochCache, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	bad := fmt.Errorf("malformed %s", epochFile)
	if v, ok := line(); !ok || v != "0" {
		return epochCache{}, bad
	}
	n, err := func() (int, error) { s, _ := line(); return strconv.Atoi(s) }()
	if err != nil || n < 0 {
		return epochCache{}, bad
	}
	var c epochCache
	for range n {
		s, ok := line()
		if !ok {
			return epochCache{}, bad
		}
		var e EpochEntry
		if _, err := fmt.Sscanf(s, "%d %d", &e.Epoch, &e.StartOffset); err != nil {
			return epochCache{}, bad
		}
		if l, ok := c.latest(); ok && (e.Epoch <= l.Epoch || e.StartOffset < l.StartOffset) {
			return epochCache{}, bad
		}
		c.entries = append(c.entries, e)
	}
	return c, nil
}

func (c *epochCache) save(dir string) error {
	return durable.WriteFile(filepath.Join(dir, epochFile), c.encode())
}

// epochsFromLog rebuilds the cache from the batches' leader epochs when the
// file is missing or unreadable.
func epochsFromLog(batches func(fn func(b record.Batch) bool) error) (epochCache, error) {
	var c epochCache
	err := batches(func(b record.Batch) bool {
		c.assign(b.PartitionLeaderEpoch(), b.BaseOffset())
		return true
	})
	return c, err
}
