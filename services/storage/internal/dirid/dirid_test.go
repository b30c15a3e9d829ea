package dirid

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadWritesOnceThenReads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "storage-1") // not created yet
	id, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !valid(id) {
		t.Fatalf("id %q", id)
	}
	again, _, err := Load(dir)
	if err != nil || again != id {
		t.Fatalf("second Load: %q, %v; want %q", again, err, id)
	}
	other, _, err := Load(t.TempDir())
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
	id, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	fresh, _, err := Load(dir)
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
		_, _, err := Load(dir)
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
	if _, _, err := Load(filepath.Join(blocker, "storage-1")); err == nil || !strings.Contains(err.Error(), "data directory id") {
		t.Fatalf("Load under a file: %v", err)
	}
}

// The id lives with the logs: a logs directory replaced or emptied under a
// kept data directory is another directory, and says so.
func TestLoadAfterLogsReplacedIsNew(t *testing.T) {
	dir := t.TempDir()
	id, _, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, LogsDir, FileName)); strings.TrimSpace(string(b)) != id {
		t.Fatalf("logs/%s holds %q, want %q", FileName, b, id)
	}
	logs := filepath.Join(dir, LogsDir)
	if err := os.RemoveAll(logs); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(logs, "lost+found"), 0o755); err != nil { // a fresh file system
		t.Fatal(err)
	}
	fresh, replaced, err := Load(dir)
	if err != nil || fresh == id || !strings.Contains(replaced, id) || !strings.Contains(replaced, "logs are lost") {
		t.Fatalf("after the logs were replaced: %q, %q, %v; old %q", fresh, replaced, err, id)
	}
	// Both files now hold the new id, and it stays.
	again, replaced, err := Load(dir)
	if err != nil || again != fresh || replaced != "" {
		t.Fatalf("next start: %q, %q, %v; want %q", again, replaced, err, fresh)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileName)); strings.TrimSpace(string(b)) != fresh {
		t.Errorf("%s holds %q, want %q", FileName, b, fresh)
	}
}

// A data directory written before the id was kept with the logs gives its
// id to logs that hold partitions; the logs' id wins over the data
// directory's.
func TestLoadKeepsTheIDOfLogsItVouchedFor(t *testing.T) {
	dir := t.TempDir()
	old := strings.Repeat("ab", 16)
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(old+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, LogsDir, "orders-0-abc"), 0o755); err != nil {
		t.Fatal(err)
	}
	id, replaced, err := Load(dir)
	if err != nil || id != old || replaced != "" {
		t.Fatalf("an older layout: %q, %q, %v; want %q", id, replaced, err, old)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, LogsDir, FileName)); strings.TrimSpace(string(b)) != old {
		t.Errorf("logs/%s holds %q, want %q", FileName, b, old)
	}

	other := strings.Repeat("cd", 16)
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(other+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, _, err := Load(dir); err != nil || id != old {
		t.Fatalf("the data directory naming another id: %q, %v; want the logs' %q", id, err, old)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileName)); strings.TrimSpace(string(b)) != old {
		t.Errorf("%s holds %q, want %q", FileName, b, old)
	}
}
