package client

import (
	"context"
	"sync"

	"skein/libs/errs"
)

// maxCachedOwners bounds how many ids an ownerCache remembers: ids come and
// go (a REST client may take a fresh transactional id for each session),
// and one forgotten costs a lookup in the metadata.
const maxCachedOwners = 4096

// ownerCache remembers which coordinator owns each group or transactional
// id. It is safe for concurrent use.
type ownerCache struct {
	kind CoordinatorKind
	noun string // "group", "transactional id": for errors

	mu sync.Mutex
	m  map[string]Coordinator // guarded by mu
}

func newOwnerCache(kind CoordinatorKind, noun string) *ownerCache {
	return &ownerCache{kind: kind, noun: noun, m: map[string]Coordinator{}}
}

// owner answers the cached coordinator of id, asking the cluster's
// metadata when there is none.
func (o *ownerCache) owner(ctx context.Context, c *Client, id string) (Coordinator, error) {
	o.mu.Lock()
	co, ok := o.m[id]
	o.mu.Unlock()
	if ok {
		return co, nil
	}
	co, err := c.FindCoordinator(ctx, o.kind, id)
	if err != nil {
		return Coordinator{}, err
	}
	if co.Addr == "" {
		return Coordinator{}, errs.Errorf(errs.CoordinatorNotAvailable, "no coordinator address for %s %q", o.noun, id)
	}
	o.put(id, co)
	return co, nil
}

// put remembers co as id's coordinator, forgetting some other id when
// maxCachedOwners are remembered.
func (o *ownerCache) put(id string, co Coordinator) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.m[id]; !ok && len(o.m) >= maxCachedOwners {
		for k := range o.m { // any one: a map's order is random
			delete(o.m, k)
			break
		}
	}
	o.m[id] = co
}

// forget drops id's entry if it still names co.
func (o *ownerCache) forget(id string, co Coordinator) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m[id] == co {
		delete(o.m, id)
	}
}

// len answers how many ids are remembered.
func (o *ownerCache) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}
