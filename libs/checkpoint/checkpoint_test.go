package checkpoint

import (
	"errors"
	"fmt"
	"testing"

	"skein/libs/errs"
)

// stores runs a test against every implementation.
func stores(t *testing.T, f func(t *testing.T, open func() Store)) {
	t.Run("memory", func(t *testing.T) {
		m := NewMemory()
		f(t, func() Store { return m })
	})
	t.Run("badger", func(t *testing.T) { f(t, reopening(t, OpenBadger)) })
	t.Run("files", func(t *testing.T) { f(t, reopening(t, OpenFiles)) })
}

// reopening answers an open for stores kept in a directory: each call
// closes the store the last one opened and opens it again, so that what was
// written must have survived.
func reopening[S Store](t *testing.T, open func(dir string) (S, error)) func() Store {
	dir := t.TempDir()
	var cur Store
	t.Cleanup(func() {
		if cur != nil {
			cur.Close()
		}
	})
	return func() Store {
		if cur != nil {
			if err := cur.Close(); err != nil {
				t.Fatal(err)
			}
		}
		s, err := open(dir)
		if err != nil {
			t.Fatal(err)
		}
		cur = s
		return s
	}
}

func TestOffsets(t *testing.T) {
	stores(t, func(t *testing.T, open func() Store) {
		s := open()
		a, b, c := Partition{"orders", 0}, Partition{"orders", 1}, Partition{"__consumer_offsets", 7}
		if err := s.SaveOffsets(map[Partition]Offsets{a: {10, 8, 0}, b: {5, 5, 2}, c: {1 << 40, 3, -1}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveOffsets(map[Partition]Offsets{a: {12, 12, 1}}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeletePartitions(b, Partition{"never-saved", 3}); err != nil {
			t.Fatal(err)
		}
		s = open()
		got, err := s.LoadOffsets()
		if err != nil {
			t.Fatal(err)
		}
		want := map[Partition]Offsets{a: {12, 12, 1}, c: {1 << 40, 3, -1}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for _, bad := range []Partition{{"", 0}, {"a\x00b", 0}} {
			if err := s.SaveOffsets(map[Partition]Offsets{bad: {}}); !errors.Is(err, errs.InvalidTopic) {
				t.Fatalf("%q: %v", bad.Topic, err)
			}
		}
	})
}

func TestGeneric(t *testing.T) {
	stores(t, func(t *testing.T, open func() Store) {
		s := open()
		val := []byte("snapshot")
		for k, v := range map[string][]byte{"producers/orders-0": val, "producers/orders-1": {1}, "other": nil} {
			if err := s.Put(k, v); err != nil {
				t.Fatal(err)
			}
		}
		val[0] = 'X' // the store kept its own copy
		if err := s.Delete("producers/orders-1"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete("never-there"); err != nil {
			t.Fatal(err)
		}
		s = open()
		if v, ok, err := s.Get("producers/orders-0"); err != nil || !ok || string(v) != "snapshot" {
			t.Fatalf("%q %v %v", v, ok, err)
		}
		if v, ok, err := s.Get("other"); err != nil || !ok || v == nil || len(v) != 0 {
			t.Fatalf("empty value: %q %v %v", v, ok, err)
		}
		if _, ok, err := s.Get("producers/orders-1"); err != nil || ok {
			t.Fatalf("deleted key: %v %v", ok, err)
		}
		if keys, err := s.Keys("producers/"); err != nil || fmt.Sprint(keys) != "[producers/orders-0]" {
			t.Fatalf("keys %v %v", keys, err)
		}
		if keys, _ := s.Keys(""); len(keys) != 2 {
			t.Fatalf("all keys %v", keys)
		}
		// Offsets and generic keys do not see each other.
		if offs, _ := s.LoadOffsets(); len(offs) != 0 {
			t.Fatalf("offsets %v", offs)
		}
		if err := s.Put("", nil); !errors.Is(err, errs.InvalidRequest) {
			t.Fatal(err)
		}
	})
}

func TestEncoding(t *testing.T) {
	for _, p := range []Partition{{"t", 0}, {"a.b-c_d", -1}, {"x", 1<<31 - 1}} {
		k, err := offsetsKey(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseOffsetsKey(k)
		if err != nil || got != p {
			t.Fatalf("%v -> %q -> %v %v", p, k, got, err)
		}
	}
	o := Offsets{HighWatermark: 1, RecoveryPoint: -1, LogStartOffset: 1 << 62}
	if got, err := decodeOffsets(encodeOffsets(o)); err != nil || got != o {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := decodeOffsets([]byte{2, 0}); err == nil {
		t.Fatal("accepted a bad value")
	}
}
