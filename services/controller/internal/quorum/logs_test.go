package quorum

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
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
