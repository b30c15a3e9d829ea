package client

import (
	"fmt"
	"testing"
)

// A gateway lives for months while REST clients take a fresh transactional
// id per session: what it remembers of their owners stays bounded, and
// the newest id is among what it keeps.
func TestOwnerCacheIsBounded(t *testing.T) {
	o := newOwnerCache(TransactionCoordinator, "transactional id")
	co := Coordinator{Addr: "127.0.0.1:1"}
	for i := range maxCachedOwners + 100 {
		o.put(fmt.Sprint("session-", i), co)
	}
	if n := o.len(); n != maxCachedOwners {
		t.Fatalf("%d ids remembered, want at most %d", n, maxCachedOwners)
	}
	last := fmt.Sprint("session-", maxCachedOwners+99)
	if got, ok := o.m[last]; !ok || got != co {
		t.Fatalf("the newest id: %v %v", got, ok)
	}
	// An id already remembered is updated in place, evicting nothing.
	o.put(last, Coordinator{Addr: "127.0.0.1:2"})
	if n := o.len(); n != maxCachedOwners || o.m[last].Addr != "127.0.0.1:2" {
		t.Fatalf("after an update: %d ids, %v", n, o.m[last])
	}
	o.forget(last, co) // names an owner it no longer has: kept
	o.forget(last, Coordinator{Addr: "127.0.0.1:2"})
	if _, ok := o.m[last]; ok {
		t.Fatal("forget kept the id")
	}
}
