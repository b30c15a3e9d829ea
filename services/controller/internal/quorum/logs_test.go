package quorum

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// Raft's lines reach slog at their level, except the election a node
// starts before it has known any leader, which every start makes: INFO,
// not WARN. An election after a leader was lost stays a WARN.
func TestRaftLineLevels(t *testing.T) {
	var buf bytes.Buffer
	w := lineWriter{slog.New(slog.NewJSONHandler(&buf, nil))}
	for _, tc := range []struct{ line, level string }{
		{"[WARN]  raft: heartbeat timeout reached, starting election: last-leader-addr= last-leader-id=\n", "INFO"},
		{"[WARN]  raft: heartbeat timeout reached, starting election: last-leader-addr=127.0.0.1:9093 last-leader-id=2\n", "WARN"},
		{"[WARN]  raft: Election timeout reached, restarting election\n", "WARN"},
		{"[ERROR] raft: failed to heartbeat to: peer=127.0.0.1:9093\n", "ERROR"},
		{"[INFO]  raft: entering leader state: leader=\"Node at 127.0.0.1:9091 [Leader]\"\n", "INFO"},
	} {
		buf.Reset()
		if _, err := w.Write([]byte(tc.line)); err != nil {
			t.Fatal(err)
		}
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("%q: %v", buf.String(), err)
		}
		if rec.Level != tc.level || rec.Msg != strings.TrimSpace(tc.line) {
			t.Errorf("%q logged at %s as %q, want %s", tc.line, rec.Level, rec.Msg, tc.level)
		}
	}
}

// A --peers list that does not match the stored Raft configuration is
// told apart, controller by controller.
func TestPeersDiffer(t *testing.T) {
	stored := []raft.Server{
		{ID: "1", Address: "127.0.0.1:9091"}, {ID: "2", Address: "127.0.0.1:9092"}, {ID: "3", Address: "127.0.0.1:9093"},
	}
	peers := func(addrs ...string) []Peer {
		var out []Peer
		for i, a := range addrs {
			out = append(out, Peer{ID: int32(i + 1), RaftAddr: a})
		}
		return out
	}
	for _, tc := range []struct {
		peers []Peer
		want  string
	}{
		{peers("127.0.0.1:9091", "127.0.0.1:9092", "127.0.0.1:9093"), ""},
		{peers("127.0.0.1:9091", "127.0.0.1:9092", "127.0.0.1:19093"), "controller 3 is at 127.0.0.1:9093 in the Raft configuration, not 127.0.0.1:19093"},
		{peers("127.0.0.1:9091", "127.0.0.1:9092"), "the Raft configuration has controller 3 at 127.0.0.1:9093, which --peers does not list"},
		{peers("127.0.0.1:9091", "127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"), "controller 4 is not in the Raft configuration"},
	} {
		if got := PeersDiffer(stored, tc.peers); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.peers, got, tc.want)
		}
	}
}
