package raftstore

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func entry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: i / 3, Type: raft.LogCommand, Data: []byte{byte(i), 'x'},
		Extensions: []byte("ext"), AppendedAt: time.Unix(1700000000, int64(i))}
}

func TestLogStore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if first, _ := s.FirstIndex(); first != 0 {
		t.Errorf("empty store first index %d", first)
	}
	if last, _ := s.LastIndex(); last != 0 {
		t.Errorf("empty store last index %d", last)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Errorf("GetLog on empty store: %v", err)
	}
	if err := s.StoreLog(entry(1)); err != nil {
		t.Fatal(err)
	}
	var batch []*raft.Log
	for i := uint64(2); i <= 300; i++ {
		batch = append(batch, entry(i))
	}
	if err := s.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	// Index 256 must sort after 255: keys are big-endian.
	if first, _ := s.FirstIndex(); first != 1 {
		t.Errorf("first %d", first)
	}
	if last, _ := s.LastIndex(); last != 300 {
		t.Errorf("last %d", last)
	}
	for _, i := range []uint64{1, 255, 256, 300} {
		if err := s.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		want := entry(i)
		if l.Index != i || l.Term != want.Term || l.Type != want.Type || !bytes.Equal(l.Data, want.Data) ||
			!bytes.Equal(l.Extensions, want.Extensions) || !l.AppendedAt.Equal(want.AppendedAt) {
			t.Errorf("entry %d read back as %+v", i, l)
		}
	}
	// Raft compacts the head and truncates a conflicting tail.
	if err := s.DeleteRange(1, 100); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(251, 300); err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 101 {
		t.Errorf("first after compaction %d", first)
	}
	if last, _ := s.LastIndex(); last != 250 {
		t.Errorf("last after truncation %d", last)
	}
	if err := s.GetLog(100, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Errorf("deleted entry: %v", err)
	}
	// An entry without data or extensions, and with no time.
	if err := s.StoreLog(&raft.Log{Index: 251, Term: 9, Type: raft.LogNoop}); err != nil {
		t.Fatal(err)
	}
	if err := s.GetLog(251, &l); err != nil || l.Data != nil || l.Extensions != nil || !l.AppendedAt.IsZero() || l.Type != raft.LogNoop {
		t.Errorf("bare entry read back as %+v (%v)", l, err)
	}

	// Everything survives a reopen.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if first, _ := s.FirstIndex(); first != 101 {
		t.Errorf("first after reopen %d", first)
	}
	if last, _ := s.LastIndex(); last != 251 {
		t.Errorf("last after reopen %d", last)
	}
}

func TestStableStore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	// raft recognises a missing key by the error's text.
	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Errorf("Get of a missing key: %v", err)
	}
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Errorf("GetUint64 of a missing key: %v", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	// Stable keys do not show up as log entries.
	if last, _ := s.LastIndex(); last != 0 {
		t.Errorf("stable keys leaked into the log: last %d", last)
	}
	s.Close()
	s = open(t, dir)
	defer s.Close()
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 42 {
		t.Errorf("term after reopen %d %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-2" {
		t.Errorf("vote after reopen %q %v", v, err)
	}
	if _, err := s.GetUint64([]byte("LastVoteCand")); err == nil {
		t.Error("a 6-byte value read as a uint64")
	}
}

func TestDecodeRefusesDamage(t *testing.T) {
	good := encodeLog(entry(5))
	var l raft.Log
	if err := decodeLog(5, good, &l); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":     nil,
		"version":   append([]byte{9}, good[1:]...),
		"truncated": good[:len(good)-1],
		"longer":    append(append([]byte(nil), good...), 0),
	} {
		if err := decodeLog(5, b, &l); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
