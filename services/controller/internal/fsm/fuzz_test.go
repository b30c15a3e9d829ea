package fsm

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
)

// Any bytes that decode as a command are applied without a panic and leave
// the machine's invariants intact.
func FuzzApply(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	seedMachine := New()
	for i := range 40 {
		cmd := randomCommand(rng, seedMachine, []string{"a", "b"})
		seedMachine.Apply(uint64(i+1), cmd)
		if b, err := proto.Marshal(cmd); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmd controllerv1.Command
		if proto.Unmarshal(data, &cmd) != nil {
			return
		}
		m := New()
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range 30 { // a small cluster to act on
			m.Apply(uint64(i+1), randomCommand(rng, m, []string{"a", "b"}))
		}
		m.Apply(100, &cmd)
		m.Apply(101, &cmd)
		if err := checkInvariants(m.Image()); err != nil {
			t.Fatalf("%s: %v", Describe(&cmd), err)
		}
	})
}
