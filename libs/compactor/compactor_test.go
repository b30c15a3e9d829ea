package compactor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func TestDue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		levels []badger.LevelInfo
		want   bool
	}{
		{"empty", nil, false},
		{"under every target", []badger.LevelInfo{{Level: 0, Score: 0.5}, {Level: 6, Score: 0.9}}, false},
		{"at the target", []badger.LevelInfo{{Level: 0, Score: 1}}, false},
		{"level 0 over", []badger.LevelInfo{{Level: 0, Score: 1.5}, {Level: 6}}, true},
		{"a lower level over", []badger.LevelInfo{{Level: 0}, {Level: 5, Score: 1.2}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Due(tc.levels); got != tc.want {
				t.Fatalf("Due = %v, want %v", got, tc.want)
			}
		})
	}
}

// open gives a store whose level 0 stalls writes after two tables: without
// compaction, a few megabytes of writes block forever.
func open(t *testing.T, dir string) *badger.DB {
	t.Helper()
	db, err := badger.Open(Options(badger.DefaultOptions(dir)).
		WithLogger(nil).
		WithMemTableSize(1 << 20).
		WithBaseTableSize(256 << 10).
		WithNumMemtables(1).
		WithNumLevelZeroTables(1).
		WithNumLevelZeroTablesStall(2).
		WithValueThreshold(64 << 10))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// write overwrites 64 keys with 1 KiB values, n times each, in batches.
func write(ctx context.Context, db *badger.DB, n int) error {
	val := make([]byte, 1024)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("after %d rounds: %w", i, err)
		}
		wb := db.NewWriteBatch()
		for k := 0; k < 64; k++ {
			val[0], val[1] = byte(i), byte(k)
			if err := wb.Set([]byte(fmt.Sprintf("key-%03d", k)), append([]byte(nil), val...)); err != nil {
				wb.Cancel()
				return err
			}
		}
		if err := wb.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func TestCompactorKeepsWritesFlowingAndDataIntact(t *testing.T) {
	db := open(t, t.TempDir())
	c := Start(db, 10*time.Millisecond, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// 16 MiB of writes: sixteen memtables through a level 0 that stalls
	// at two tables.
	done := make(chan error, 1)
	go func() { done <- write(ctx, db, 256) }()
	if err := <-done; err != nil {
		t.Fatalf("writes did not complete: %v", err)
	}
	// Every key holds its last value.
	err := db.View(func(txn *badger.Txn) error {
		for k := 0; k < 64; k++ {
			item, err := txn.Get([]byte(fmt.Sprintf("key-%03d", k)))
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if len(v) != 1024 || v[0] != byte(255) || v[1] != byte(k) {
				return fmt.Errorf("key %d holds %v..., want [255 %d]", k, v[:2], k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for Due(db.Levels()) {
		if time.Now().After(deadline) {
			t.Fatalf("levels still over their targets: %+v", db.Levels())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Stop()
	c.Stop() // twice is fine
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// Without the compactor the same writes stall: the test above would fail
// if Start did nothing.
func TestWritesStallWithoutACompactor(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a stall")
	}
	db := open(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- write(ctx, db, 256) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("16 MiB of writes completed with no compaction: the store's settings no longer stall, so the compactor test proves nothing")
		}
	case <-time.After(4 * time.Second):
		// Stalled inside a flush: what we wanted to see.
	}
	c := Start(db, 10*time.Millisecond, nil) // unblocks the stalled write so Close can finish
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the compactor did not release a stalled write")
	}
	c.Stop()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
