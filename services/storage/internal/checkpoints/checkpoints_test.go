package checkpoints

import (
	"testing"

	"skein/services/storage/internal/replica"
)

func TestRoundTripAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get("t-0-x"); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	want := replica.Checkpoint{HW: 41, LogStartOffset: 7, RecoveryPoint: 40}
	if err := s.Put("t-0-x", want); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("t-1-x", replica.Checkpoint{HW: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutProducers("t-0-x", []byte(`{"next":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("t-1-x"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, ok, err := s.Get("t-0-x")
	if err != nil || !ok || got != want {
		t.Fatalf("after reopen: %+v %v %v", got, ok, err)
	}
	if raw, ok, err := s.GetProducers("t-0-x"); err != nil || !ok || string(raw) != `{"next":3}` {
		t.Fatalf("producer snapshot after reopen: %q %v %v", raw, ok, err)
	}
	if _, ok, _ := s.Get("t-1-x"); ok {
		t.Error("deleted checkpoint came back")
	}
}
