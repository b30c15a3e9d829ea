package log

// Index files beside each segment (big endian, fixed-size entries, as Kafka's):
//
//	| file                     | entry bytes | fields                                         |
//	|--------------------------|-------------|------------------------------------------------|
//	| <base>.index             | 8           | relative base offset uint32, position uint32   |
//	| <base>.timeindex         | 12          | max timestamp so far int64, relative offset uint32 |
//
// Both are sparse caches of what the .log holds: an offset entry every
// index.interval.bytes, a time entry when the segment's max timestamp grows
// at such a point and when the segment is rolled. The in-memory copy is
// authoritative while the log is open; the files are written at roll, close,
// truncation and compaction, never fsynced on their own, and rebuilt from
// the .log on open when they are missing or do not match it.

import (
	"encoding/binary"
	"errors"
	"os"
	"sort"
)

const (
	indexEntrySize = 8
	timeEntrySize  = 12
)

// indexEntry maps the base offset of a batch (relative to the segment's base)
// to its byte position in the .log.
type indexEntry struct {
	rel uint32
	pos uint32
}

// timeEntry says that the batch holding relative offset rel is the first one
// whose max timestamp reached ts: every earlier batch's is lower.
type timeEntry struct {
	ts  int64
	rel uint32
}

// floorPos is the position of the last indexed batch whose base offset is at
// most rel, or 0: where a scan for rel starts. It also returns the relative
// base offset the batch there must have, so that a reader can tell a
// damaged index from a good one (and scan from 0 instead).
func floorPos(idx []indexEntry, rel uint32) (int64, uint32) {
	i := sort.Search(len(idx), func(i int) bool { return idx[i].rel > rel })
	if i == 0 {
		return 0, 0
	}
	return int64(idx[i-1].pos), idx[i-1].rel
}

// ceilPos is the position of the first indexed batch whose base offset is
// at least rel (relative to the segment's base, at least 0), if the index
// has one.
func ceilPos(idx []indexEntry, rel Offset) (int64, bool) {
	if rel > Offset(^uint32(0)) {
		return 0, false
	}
	i := sort.Search(len(idx), func(i int) bool { return Offset(idx[i].rel) >= rel })
	if i == len(idx) {
		return 0, false
	}
	return int64(idx[i].pos), true
}

// floorTime is the relative offset of the last time entry with ts <= target,
// and whether there is one.
func floorTime(times []timeEntry, target int64) (uint32, bool) {
	i := sort.Search(len(times), func(i int) bool { return times[i].ts > target })
	if i == 0 {
		return 0, false
	}
	return times[i-1].rel, true
}

func encodeIndex(idx []indexEntry) []byte {
	out := make([]byte, 0, len(idx)*indexEntrySize)
	for _, e := range idx {
		out = binary.BigEndian.AppendUint32(out, e.rel)
		out = binary.BigEndian.AppendUint32(out, e.pos)
	}
	return out
}

func encodeTimes(times []timeEntry) []byte {
	out := make([]byte, 0, len(times)*timeEntrySize)
	for _, e := range times {
		out = binary.BigEndian.AppendUint64(out, uint64(e.ts))
		out = binary.BigEndian.AppendUint32(out, e.rel)
	}
	return out
}

var errBadIndex = errors.New("index does not match its segment")

// decodeIndex parses an .index file and checks what can be checked without
// the .log: whole entries, strictly increasing offsets and positions, all
// positions inside a log of logSize bytes.
func decodeIndex(b []byte, logSize int64) ([]indexEntry, error) {
	if len(b)%indexEntrySize != 0 {
		return nil, errBadIndex
	}
	idx := make([]indexEntry, len(b)/indexEntrySize)
	for i := range idx {
		e := indexEntry{rel: binary.BigEndian.Uint32(b[i*8:]), pos: binary.BigEndian.Uint32(b[i*8+4:])}
		if int64(e.pos) >= logSize || (i > 0 && (e.rel <= idx[i-1].rel || e.pos <= idx[i-1].pos)) {
			return nil, errBadIndex
		}
		idx[i] = e
	}
	return idx, nil
}

// decodeTimes parses a .timeindex file: whole entries, strictly increasing
// timestamps, non-decreasing offsets below maxRel.
func decodeTimes(b []byte, maxRel uint32) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, errBadIndex
	}
	times := make([]timeEntry, len(b)/timeEntrySize)
	for i := range times {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(b[i*12:])), rel: binary.BigEndian.Uint32(b[i*12+8:])}
		if e.rel > maxRel || (i > 0 && (e.ts <= times[i-1].ts || e.rel < times[i-1].rel)) {
			return nil, errBadIndex
		}
		times[i] = e
	}
	return times, nil
}

// writeFile replaces path's contents. Index files are caches, so there is no
// fsync and no rename: a torn write is caught by decodeIndex on open.
func writeFile(path string, data []byte) error {
	return os.WriteFile(path, data, 0o644)
}
