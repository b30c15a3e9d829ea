package loopback

import (
	"net"
	"testing"
)

func TestAddrsAreDistinctAndFree(t *testing.T) {
	for range 20 {
		addrs := Addrs(t, 8)
		if len(addrs) != 8 {
			t.Fatalf("got %d addresses, want 8", len(addrs))
		}
		seen := map[string]bool{}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("address %s handed out twice in %v", a, addrs)
			}
			seen[a] = true
			l, err := net.Listen("tcp", a)
			if err != nil {
				t.Fatalf("address %s is not free after Addrs returned: %v", a, err)
			}
			l.Close()
		}
	}
}
