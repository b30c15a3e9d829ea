package spareproc

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"testing"
)

// fake records every GOMAXPROCS the lender sets and what it restores.
type fake struct {
	procs    int
	history  []int
	restored []int
}

func newFake(procs int) (*fake, *lender) {
	f := &fake{procs: procs}
	return f, &lender{
		get:     func() int { return f.procs },
		set:     func(n int) { f.procs = n; f.history = append(f.history, n) },
		restore: func(base int) { f.procs = base; f.restored = append(f.restored, base) },
	}
}

func TestLender(t *testing.T) {
	for _, tc := range []struct {
		name     string
		base     int
		steps    string // e: a call starts, x: a call ends
		history  []int
		restored []int
		final    int
	}{
		{"one call", 1, "ex", []int{2}, []int{1}, 1},
		{"two calls in turn", 1, "exex", []int{2, 2}, []int{1, 1}, 1},
		{"two calls overlapping", 1, "eexx", []int{2, 3, 2}, []int{1}, 1},
		{"three overlapping, ending out of turn", 2, "eexexx", []int{3, 4, 3, 4, 3}, []int{2}, 2},
		{"a larger process", 8, "ex", []int{9}, []int{8}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, l := newFake(tc.base)
			for _, s := range tc.steps {
				if s == 'e' {
					l.enter()
				} else {
					l.exit()
				}
			}
			if !slices.Equal(f.history, tc.history) || !slices.Equal(f.restored, tc.restored) || f.procs != tc.final {
				t.Fatalf("set %v, restored %v, now %d; want %v, %v, %d", f.history, f.restored, f.procs, tc.history, tc.restored, tc.final)
			}
		})
	}
}

// The base is read when the first of overlapping calls starts: a process
// whose setting changed between calls gets its new setting back.
func TestLenderReadsBaseAtFirstCall(t *testing.T) {
	f, l := newFake(1)
	l.enter()
	l.exit()
	f.procs = 4
	l.enter()
	if f.procs != 5 {
		t.Fatalf("GOMAXPROCS %d during the call, want 5", f.procs)
	}
	l.exit()
	if f.procs != 4 {
		t.Fatalf("GOMAXPROCS %d after, want 4", f.procs)
	}
}

func TestDuring(t *testing.T) {
	t.Setenv("GOMAXPROCS", "1") // restore puts back the explicit setting
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	boom := errors.New("boom")
	var inside int
	err := During(func() error {
		inside = runtime.GOMAXPROCS(0)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("During returned %v, want f's error", err)
	}
	if inside != 2 {
		t.Fatalf("GOMAXPROCS %d during the call, want 2", inside)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS %d after the call, want 1", got)
	}
}

func TestDuringPanics(t *testing.T) {
	t.Setenv("GOMAXPROCS", "1")
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	func() {
		defer func() { _ = recover() }()
		_ = During(func() error { panic("boom") })
	}()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS %d after a call that panicked, want 1", got)
	}
}

// With no GOMAXPROCS in the environment, what comes back is the runtime's
// default (which follows the CPU limit as it changes), not the number read
// when the call began: here a setting made in code is replaced by it.
func TestDuringRestoresTheDefault(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	if err := os.Unsetenv("GOMAXPROCS"); err != nil {
		t.Fatal(err)
	}
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(def + 2)
	var inside int
	if err := During(func() error { inside = runtime.GOMAXPROCS(0); return nil }); err != nil {
		t.Fatal(err)
	}
	if inside != def+3 {
		t.Fatalf("GOMAXPROCS %d during the call, want %d", inside, def+3)
	}
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Fatalf("GOMAXPROCS %d after the call, want the default %d", got, def)
	}
}
