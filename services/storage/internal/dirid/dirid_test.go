package dirid

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadWritesOnceThenReads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "storage-1") // not created yet
	id, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !valid(id) {
		t.Fatalf("id %q", id)
	}
	again, err := Load(dir)
	if err != nil || again != id {
		t.Fatalf("second Load: %q, %v; want %q", again, err, id)
	}
	other, err := Load(t.TempDir())
	if err != nil || other == id {
		t.Fatalf("another directory's id %q (%v) equals %q", other, err, id)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+".tmp")); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}

// A wiped directory gets a new id: what the controllers recognise as lost
// logs.
func TestLoadAfterWipeIsNew(t *testing.T) {
	dir := t.TempDir()
	id, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	fresh, err := Load(dir)
	if err != nil || fresh == id {
		t.Fatalf("after a wipe: %q, %v; old %q", fresh, err, id)
	}
}

func TestLoadRefusesADamagedFile(t *testing.T) {
	for _, content := range []string{"", "xyz", strings.Repeat("g", 32), strings.Repeat("a", 31), strings.Repeat("a", 200)} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), "not a data directory id") {
			t.Errorf("content %q: %v", content, err)
		}
		// The damaged file is left as it was, for the operator to look at.
		if b, _ := os.ReadFile(filepath.Join(dir, FileName)); string(b) != content {
			t.Errorf("content %q rewritten to %q", content, b)
		}
	}
}

func TestLoadReportsAnUnwritableDirectory(t *testing.T) {
	// A file where the directory should be: it fails even for root, which
	// writes through permissions.
	parent := t.TempDir()
	blocker := filepath.Join(parent, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(filepath.Join(blocker, "storage-1")); err == nil || !strings.Contains(err.Error(), "data directory id") {
		t.Fatalf("Load under a file: %v", err)
	}
}
