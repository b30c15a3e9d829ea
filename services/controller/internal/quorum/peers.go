package quorum

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
)

// Peer is one controller of the quorum.
type Peer struct {
	ID       int32
	RaftAddr string
	GRPCAddr string
}

// ParsePeers reads "1=raftaddr=grpcaddr,2=raftaddr=grpcaddr,...".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[int32]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, "=")
		if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
			return nil, fmt.Errorf("peer %q: want id=raftaddr=grpcaddr", item)
		}
		id, err := strconv.ParseInt(parts[0], 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("peer %q: bad id", item)
		}
		if seen[int32(id)] {
			return nil, fmt.Errorf("peer id %d listed twice", id)
		}
		seen[int32(id)] = true
		out = append(out, Peer{ID: int32(id), RaftAddr: parts[1], GRPCAddr: parts[2]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no peers")
	}
	slices.SortFunc(out, func(a, b Peer) int { return int(a.ID) - int(b.ID) })
	return out, nil
}

// FormatPeers is ParsePeers' inverse.
func FormatPeers(peers []Peer) string {
	var parts []string
	for _, p := range peers {
		parts = append(parts, fmt.Sprintf("%d=%s=%s", p.ID, p.RaftAddr, p.GRPCAddr))
	}
	return strings.Join(parts, ",")
}

// PeersDiffer answers, when the Raft configuration stored in a data
// directory (servers) does not name the same controllers at the same Raft
// addresses as the --peers list, what differs ("" when they agree). Raft
// runs by the stored configuration: a --peers list changed afterwards only
// misleads whoever reads it (this controller's own answers name a leader
// at the --peers address).
func PeersDiffer(servers []raft.Server, peers []Peer) string {
	stored := map[string]string{}
	for _, s := range servers {
		stored[string(s.ID)] = string(s.Address)
	}
	var diffs []string
	seen := map[string]bool{}
	for _, p := range peers {
		id := strconv.Itoa(int(p.ID))
		seen[id] = true
		switch addr, ok := stored[id]; {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("controller %s is not in the Raft configuration", id))
		case addr != p.RaftAddr:
			diffs = append(diffs, fmt.Sprintf("controller %s is at %s in the Raft configuration, not %s", id, addr, p.RaftAddr))
		}
	}
	for _, s := range servers {
		if !seen[string(s.ID)] {
			diffs = append(diffs, fmt.Sprintf("the Raft configuration has controller %s at %s, which --peers does not list", s.ID, s.Address))
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}
