package replica_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/checkpoint"
	"skein/libs/metadata"
	"skein/services/storage/internal/partition"
	"skein/services/storage/internal/replica"
)

type noFetchers struct{}

func (noFetchers) Follow(partition.TP, *partition.Partition, int32) {}
func (noFetchers) Unfollow(partition.TP)                            {}

type noProposer struct{}

func (noProposer) ProposeISR(partition.ISRChange, func(partition.State, error)) {}

const (
	idA = "0a1b2c3d-0000-8000-8000-00000000000a"
	idB = "0a1b2c3d-0000-8000-8000-00000000000b"
)

// strayImage is a cluster of one node (1) at version v holding topics a
// and b (one partition each, both on node 1) when they are named.
func strayImage(t *testing.T, v metadata.Version, topics ...string) *metadata.Image {
	t.Helper()
	im := metadata.New("test")
	recs := []*controllerv1.MetadataRecord{metadata.BrokerRecord(&controllerv1.BrokerRecord{Id: 1, GrpcAddr: "127.0.0.1:1", BrokerEpoch: 1})}
	for _, name := range topics {
		id := map[string]string{"a": idA, "b": idB}[name]
		recs = append(recs,
			metadata.TopicRecord(&controllerv1.TopicRecord{TopicId: id, Name: name}),
			metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: name, TopicId: id, Partition: 0, Replicas: []int32{1}, Isr: []int32{1}, Leader: 1}))
	}
	if err := im.Apply(&controllerv1.MetadataDelta{Version: uint64(v), Records: recs}); err != nil {
		t.Fatal(err)
	}
	return im
}

func logDirs(t *testing.T, dataDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// A topic deleted while a node was down leaves its directory behind; the
// node removes it once it sees an image at least as new as the one the
// directory was made from, and never on an older one.
func TestStrayPartitionDirectoriesAreRemoved(t *testing.T) {
	dataDir := t.TempDir()
	store := checkpoint.NewMemory()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() *replica.Manager {
		return replica.New(replica.Config{Self: 1, DataDir: dataDir}, log, noProposer{}, noFetchers{}, store)
	}
	dirA := replica.DirName(partition.TP{Topic: "a", Partition: 0}, idA)
	dirB := replica.DirName(partition.TP{Topic: "b", Partition: 0}, idB)
	// Both topics hosted at version 10, a lost-and-found left by the file
	// system, and a file.
	m := start()
	m.OnImage(strayImage(t, 10, "a", "b"))
	m.Close()
	if got := logDirs(t, dataDir); !slices.Equal(got, []string{dirA, dirB}) {
		t.Fatalf("directories %v, want %v", got, []string{dirA, dirB})
	}
	for _, p := range []string{"lost+found", ".hidden-1-x"} {
		if err := os.Mkdir(filepath.Join(dataDir, "logs", p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.SaveOffsets(map[checkpoint.Partition]checkpoint.Offsets{{Topic: "b", Partition: 0}: {HighWatermark: 5}}); err != nil {
		t.Fatal(err)
	}

	// Restarted, it meets a controller that has not caught up (version 9,
	// before either topic): nothing is removed, though neither is named.
	m = start()
	m.OnImage(strayImage(t, 9))
	if got := logDirs(t, dataDir); len(got) != 4 {
		t.Fatalf("an image older than the directories removed some: %v", got)
	}
	// Then b is deleted (version 12): its directory and checkpoint go,
	// a's directory and the other entries stay.
	m.OnImage(strayImage(t, 12, "a"))
	want := []string{".hidden-1-x", dirA, "lost+found"}
	if got := logDirs(t, dataDir); !slices.Equal(got, want) {
		t.Fatalf("after b's deletion: directories %v, want %v", got, want)
	}
	all, err := store.LoadOffsets()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := all[checkpoint.Partition{Topic: "b", Partition: 0}]; ok {
		t.Errorf("the stray partition's offsets are still in the checkpoint store: %v", all)
	}
	if _, err := m.Get(partition.TP{Topic: "a", Partition: 0}); err != nil {
		t.Fatalf("a is no longer hosted: %v", err)
	}
	m.Close()
}

// A node whose store has no recorded version (its directories were made
// before it kept one) does not trust its first image: it records the
// version and removes strays only after a later start.
func TestStrayDirectoriesWaitForARecordedVersion(t *testing.T) {
	dataDir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := replica.New(replica.Config{Self: 1, DataDir: dataDir}, log, noProposer{}, noFetchers{}, checkpoint.NewMemory())
	m.OnImage(strayImage(t, 10, "a", "b"))
	m.Close()
	store := checkpoint.NewMemory() // what the node kept before: no version
	m = replica.New(replica.Config{Self: 1, DataDir: dataDir}, log, noProposer{}, noFetchers{}, store)
	m.OnImage(strayImage(t, 12, "a"))
	m.Close()
	if got := logDirs(t, dataDir); len(got) != 2 {
		t.Fatalf("strays removed without a recorded version: %v", got)
	}
	m = replica.New(replica.Config{Self: 1, DataDir: dataDir}, log, noProposer{}, noFetchers{}, store)
	m.OnImage(strayImage(t, 12, "a"))
	defer m.Close()
	if got, want := logDirs(t, dataDir), []string{replica.DirName(partition.TP{Topic: "a", Partition: 0}, idA)}; !slices.Equal(got, want) {
		t.Fatalf("after the next start: %v, want %v", got, want)
	}
}
