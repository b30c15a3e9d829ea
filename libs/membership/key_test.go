package membership

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func startKeyed(t *testing.T, id int32, key []byte, seeds ...string) *Node {
	t.Helper()
	n, err := Start(Config{BindAddr: "127.0.0.1:0", Seeds: seeds, Meta: Meta{Role: RoleStorage, ID: id}, Logger: quiet, SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Kill() })
	return n
}

// Members with the same key gossip; a member without it, or with another
// key, is never admitted.
func TestSecretKeyKeepsStrangersOut(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a := startKeyed(t, 1, key)
	b := startKeyed(t, 2, key, a.Addr())
	waitEvent(t, a, EventJoin, "storage-2", 5*time.Second)
	_ = b
	startKeyed(t, 3, nil, a.Addr())
	startKeyed(t, 4, []byte("another key, 32 bytes long......"), a.Addr())
	time.Sleep(2 * time.Second)
	for _, m := range a.Members() {
		if m.Meta.ID == 3 || m.Meta.ID == 4 {
			t.Errorf("%s admitted without the key", m.Name)
		}
	}
	if n := len(a.Members()); n != 2 {
		t.Errorf("%d members, want the 2 with the key", n)
	}
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n")
	if k, err := ReadKeyFile(good); err != nil || len(k) != 32 {
		t.Errorf("good key: %d bytes, %v", len(k), err)
	}
	for _, tc := range []struct{ path, want string }{
		{write("notb64", "not base64!"), "not base64"},
		{write("short", "c2hvcnQ="), "5 bytes, want 16, 24 or 32"},
		{filepath.Join(dir, "absent"), "no such file"},
	} {
		if _, err := ReadKeyFile(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
}
