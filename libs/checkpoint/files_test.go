package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
)

// A store an earlier version kept in badger is converted at the first open:
// the same offsets and keys, and none of badger's files left.
func TestFilesConvertsBadger(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBadger(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, c := Partition{"orders", 0}, Partition{"orders", 3}
	if err := b.SaveOffsets(map[Partition]Offsets{a: {10, 8, 2}, c: {7, 7, 0}}); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"producers/orders-0-x": "snap", "metadata/partition-dirs": `{"v":1}`} {
		if err := b.Put(k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second open finds files only
		f, err := OpenFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		if f.Converted() != (i == 0) {
			t.Errorf("open %d: converted %v", i, f.Converted())
		}
		offs, _ := f.LoadOffsets()
		if len(offs) != 2 || offs[a] != (Offsets{10, 8, 2}) || offs[c] != (Offsets{7, 7, 0}) {
			t.Errorf("offsets after the conversion: %v", offs)
		}
		if v, ok, err := f.Get("producers/orders-0-x"); err != nil || !ok || string(v) != "snap" {
			t.Errorf("a key after the conversion: %q %v %v", v, ok, err)
		}
		if keys, err := f.Keys(""); err != nil || len(keys) != 2 {
			t.Errorf("keys after the conversion: %v %v", keys, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); n == "MANIFEST" || strings.HasSuffix(n, ".vlog") || strings.HasSuffix(n, ".mem") || strings.HasSuffix(n, ".sst") {
			t.Errorf("badger's %s is still there", n)
		}
	}
}

// One process at a time: a second open of the directory is refused with a
// message that says why, until the first closes.
func TestFilesLock(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := OpenFiles(dir); err == nil || errs.Of(err) != errs.KafkaStorageError || !strings.Contains(err.Error(), "another process") {
		if g != nil {
			g.Close()
		}
		t.Fatalf("second open: %v", err)
	}
	f.Close()
	g, err := OpenFiles(dir)
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	g.Close()
}

// A write that fails (here the temporary file cannot be made, and the
// offsets file to write is open read-only, as writes fail on a full disk)
// answers KAFKA_STORAGE_ERROR and changes nothing: what was saved before
// is what is read, now and after a reopen, and the next write that can be
// made is.
func TestFilesFailedWriteChangesNothing(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := Partition{"t", 0}
	if err := f.SaveOffsets(map[Partition]Offsets{a: {5, 5, 0}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Put("k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, tmpDir)
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o644); err != nil { // not a directory: every write fails
		t.Fatal(err)
	}
	older := (f.saved + 1) % 2
	rw := f.slots[older]
	if f.slots[older], err = os.Open(rw.Name()); err != nil {
		t.Fatal(err)
	}
	if err := f.SaveOffsets(map[Partition]Offsets{a: {9, 9, 0}}); errs.Of(err) != errs.KafkaStorageError {
		t.Errorf("SaveOffsets with no room: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if err := f.Put("k", []byte("v2")); errs.Of(err) != errs.KafkaStorageError {
		t.Errorf("Put with no room: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if offs, _ := f.LoadOffsets(); offs[a] != (Offsets{5, 5, 0}) {
		t.Errorf("offsets after a failed save: %v", offs)
	}
	os.Remove(tmp)
	os.Mkdir(tmp, 0o755)
	f.slots[older].Close()
	f.slots[older] = rw
	if err := f.SaveOffsets(map[Partition]Offsets{{"t", 1}: {1, 1, 0}}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f, err = OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if offs, _ := f.LoadOffsets(); len(offs) != 2 || offs[a] != (Offsets{5, 5, 0}) {
		t.Errorf("offsets after a reopen: %v", offs)
	}
	if v, _, _ := f.Get("k"); string(v) != "v1" {
		t.Errorf("k after a failed put: %q, want v1", v)
	}
}

// Damage is found, not taken for data: a damaged offsets file stops the
// open with a message naming it, a damaged key's file fails its Get, and
// what a crash left in tmp/ is removed.
func TestFilesDamage(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SaveOffsets(map[Partition]Offsets{{"t", 0}: {5, 5, 0}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Put("producers/t-0", []byte("snapshot")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	kv := filepath.Join(dir, kvDir, "producers", "t-0")
	raw, _ := os.ReadFile(kv)
	raw[len(raw)-1] ^= 1
	os.WriteFile(kv, raw, 0o644)
	os.WriteFile(filepath.Join(dir, tmpDir, "w-7"), []byte("half"), 0o644)
	f, err = OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Get("producers/t-0"); errs.Of(err) != errs.KafkaStorageError || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("Get of a damaged value: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, tmpDir, "w-7")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a leftover temporary file: %v", err)
	}
	if err := f.Put("../x", nil); errs.Of(err) != errs.InvalidRequest {
		t.Errorf("a key that leaves the directory: %v", err)
	}
	f.Close()
	// One save so far, in offsets.1 (offsets.0 still empty): torn, it is
	// the first save a crash cut short, and nothing was saved.
	off := filepath.Join(dir, offsetsFile+".1")
	whole, _ := os.ReadFile(off)
	os.WriteFile(off, whole[:len(whole)-3], 0o644)
	g, err := OpenFiles(dir)
	if err != nil {
		t.Fatalf("open after a torn first save: %v", err)
	}
	if offs, _ := g.LoadOffsets(); len(offs) != 0 {
		t.Errorf("offsets after a torn first save: %v, want none", offs)
	}
	// Two saves, both files damaged: no whole save is left, and the open
	// says so, naming them.
	for range 2 {
		if err := g.SaveOffsets(map[Partition]Offsets{{"t", 0}: {6, 6, 0}}); err != nil {
			t.Fatal(err)
		}
	}
	g.Close()
	for _, n := range []string{".0", ".1"} {
		raw, _ := os.ReadFile(filepath.Join(dir, offsetsFile+n))
		raw[len(offsetsHead)+9] ^= 0xff
		os.WriteFile(filepath.Join(dir, offsetsFile+n), raw, 0o644)
	}
	if g, err := OpenFiles(dir); err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), off) {
		if g != nil {
			g.Close()
		}
		t.Errorf("open with both offsets files damaged: %v", err)
	}
}

// An earlier version run on a converted directory (a rollback) makes a
// badger store of its own there, newer than the files: the next open
// converts that one, not keeping the files from before the rollback.
func TestFilesConvertsAgainAfterARollback(t *testing.T) {
	dir := t.TempDir()
	a := Partition{"t", 0}
	badgerWith := func(hw record.Offset, snap string) {
		t.Helper()
		b, err := OpenBadger(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.SaveOffsets(map[Partition]Offsets{a: {HighWatermark: hw}}); err != nil {
			t.Fatal(err)
		}
		if err := b.Put("producers/t-0", []byte(snap)); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	open := func() *Files {
		t.Helper()
		f, err := OpenFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	badgerWith(5, "old")
	f := open() // converted
	if err := f.Put("producers/t-1", []byte("files only")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	time.Sleep(20 * time.Millisecond)
	badgerWith(9, "after the rollback")
	f = open()
	defer f.Close()
	if offs, _ := f.LoadOffsets(); offs[a].HighWatermark != 9 {
		t.Errorf("HW after converting again: %d, want the rollback's 9", offs[a].HighWatermark)
	}
	if v, _, _ := f.Get("producers/t-0"); string(v) != "after the rollback" {
		t.Errorf("snapshot after converting again: %q", v)
	}
	if _, ok, _ := f.Get("producers/t-1"); ok {
		t.Error("a key from before the rollback survived")
	}
}

// Saves go to the two offsets files in turn: a save cut short by a crash
// (the newer file torn) leaves the one before it, which the open takes.
func TestFilesTornSaveKeepsThePreviousOne(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := Partition{"t", 0}
	for _, hw := range []int64{5, 9, 12} { // into offsets.1, .0, .1
		if err := f.SaveOffsets(map[Partition]Offsets{a: {HighWatermark: record.Offset(hw)}}); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	check := func(want record.Offset) {
		t.Helper()
		g, err := OpenFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if offs, _ := g.LoadOffsets(); offs[a].HighWatermark != want {
			t.Errorf("HW after the open: %d, want %d", offs[a].HighWatermark, want)
		}
	}
	check(12)
	newest := filepath.Join(dir, offsetsFile+".1")
	raw, _ := os.ReadFile(newest)
	os.WriteFile(newest, raw[:len(raw)/2], 0o644) // torn
	check(9)
	// The next save overwrites the older file (the torn one is newer by
	// sequence no more: it is not whole), and is what the open takes.
	g, err := OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SaveOffsets(map[Partition]Offsets{a: {HighWatermark: 20}}); err != nil {
		t.Fatal(err)
	}
	g.Close()
	check(20)
}
