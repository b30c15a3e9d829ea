package replica_test

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// node sets it aside (renamed .stray) once it sees an image at least as new
// as the one the directory was made from, and never on an older one.
func TestStrayPartitionDirectoriesAreSetAside(t *testing.T) {
	dataDir := t.TempDir()
	store := checkpoint.NewMemory()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(self int32) *replica.Manager {
		return replica.New(replica.Config{Self: self, DataDir: dataDir}, log, noProposer{}, noFetchers{}, store)
	}
	dirA := replica.DirName(partition.TP{Topic: "a", Partition: 0}, idA)
	dirB := replica.DirName(partition.TP{Topic: "b", Partition: 0}, idB)
	m := start(1)
	m.OnImage(strayImage(t, 10, "a", "b"))
	m.Close()
	if got := logDirs(t, dataDir); !slices.Equal(got, []string{dirA, dirB}) {
		t.Fatalf("directories %v, want %v", got, []string{dirA, dirB})
	}
	// A lost-and-found left by the file system, and a hidden directory.
	for _, p := range []string{"lost+found", ".hidden-1-x"} {
		if err := os.Mkdir(filepath.Join(dataDir, "logs", p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	all := []string{".hidden-1-x", dirA, dirB, "lost+found"}

	// Started with another node's id (its volume mixed up): nothing is
	// set aside, though nothing is assigned to it.
	m = start(2)
	m.OnImage(strayImage(t, 12))
	m.Close()
	if got := logDirs(t, dataDir); !slices.Equal(got, all) {
		t.Fatalf("a node with another id set directories aside: %v", got)
	}
	// Restarted, it meets a controller that has not caught up (version 9,
	// before either topic): nothing is set aside, though neither is named.
	m = start(1)
	m.OnImage(strayImage(t, 9))
	if got := logDirs(t, dataDir); !slices.Equal(got, all) {
		t.Fatalf("an image older than the directories set some aside: %v", got)
	}
	// Then b is deleted (version 12): its directory is set aside; a's and
	// the other entries stay.
	m.OnImage(strayImage(t, 12, "a"))
	want := []string{".hidden-1-x", dirA, dirB + ".stray", "lost+found"}
	if got := logDirs(t, dataDir); !slices.Equal(got, want) {
		t.Fatalf("after b's deletion: directories %v, want %v", got, want)
	}
	if _, err := m.Get(partition.TP{Topic: "a", Partition: 0}); err != nil {
		t.Fatalf("a is no longer hosted: %v", err)
	}
	m.Close()
}

// A node whose store has no recorded version (its directories were made
// before it kept one) does not trust its first image: it records the
// version and sets strays aside only after a later start.
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
	if got := logDirs(t, dataDir); len(got) != 2 || strings.HasSuffix(got[1], ".stray") {
		t.Fatalf("strays set aside without a recorded version: %v", got)
	}
	m = replica.New(replica.Config{Self: 1, DataDir: dataDir}, log, noProposer{}, noFetchers{}, store)
	m.OnImage(strayImage(t, 12, "a"))
	defer m.Close()
	dirB := replica.DirName(partition.TP{Topic: "b", Partition: 0}, idB)
	if got, want := logDirs(t, dataDir), []string{replica.DirName(partition.TP{Topic: "a", Partition: 0}, idA), dirB + ".stray"}; !slices.Equal(got, want) {
		t.Fatalf("after the next start: %v, want %v", got, want)
	}
}

// getFailing is a store whose Get fails while fail is set.
type getFailing struct {
	checkpoint.Store
	fail bool
}

func (g *getFailing) Get(key string) ([]byte, bool, error) {
	if g.fail {
		return nil, false, errors.New("disk trouble")
	}
	return g.Store.Get(key)
}

// A directory is never made without its mark: while the mark cannot be
// read, a new replica is not opened (the log directory is reported failed).
func TestNoPartitionDirectoryWithoutItsMark(t *testing.T) {
	dataDir := t.TempDir()
	store := &getFailing{Store: checkpoint.NewMemory(), fail: true}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := replica.New(replica.Config{Self: 1, DataDir: dataDir}, log, noProposer{}, noFetchers{}, store)
	defer m.Close()
	m.OnImage(strayImage(t, 10, "a"))
	if _, err := m.Get(partition.TP{Topic: "a", Partition: 0}); err == nil || !m.LogDirFailed() {
		t.Fatalf("a replica opened while its mark could not be read (log dir failed: %v)", m.LogDirFailed())
	}
	store.fail = false
	m.OnImage(strayImage(t, 11, "a"))
	if _, err := m.Get(partition.TP{Topic: "a", Partition: 0}); err != nil {
		t.Fatalf("once the mark reads: %v", err)
	}
	if raw, ok, err := store.Get("metadata/partition-dirs"); err != nil || !ok || !strings.Contains(string(raw), `"version":11`) {
		t.Fatalf("mark %s %v %v, want version 11", raw, ok, err)
	}
}

// A replica the image drops is removed, not set aside as a stray by the
// same image's look for strays (which once found its directory in neither
// the image nor the hosted replicas, and renamed it).
func TestADeletedReplicaIsRemovedNotSetAside(t *testing.T) {
	dataDir := t.TempDir()
	store := checkpoint.NewMemory()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() *replica.Manager {
		return replica.New(replica.Config{Self: 1, DataDir: dataDir}, log, noProposer{}, noFetchers{}, store)
	}
	dirA := replica.DirName(partition.TP{Topic: "a", Partition: 0}, idA)
	m := start()
	m.OnImage(strayImage(t, 10, "a", "b"))
	m.Close()
	// Restarted, it first hears from a controller behind the directories'
	// mark (no look for strays yet), then from one past it that deleted b.
	m = start()
	defer m.Close()
	m.OnImage(strayImage(t, 9, "a", "b"))
	m.OnImage(strayImage(t, 12, "a"))
	if got := logDirs(t, dataDir); !slices.Equal(got, []string{dirA}) {
		t.Fatalf("log directories %v, want only %s: b's removed", got, dirA)
	}
}
