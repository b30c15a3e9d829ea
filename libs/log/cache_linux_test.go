package log

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident reports, page by page, whether [off, off+n) of the file at path
// is in the page cache.
func resident(t *testing.T, path string, off, n int64) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	vec := make([]byte, (n+int64(os.Getpagesize())-1)/int64(os.Getpagesize()))
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal("mincore:", errno)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 == 1
	}
	return out
}

// waitTrims waits until the trimming goroutine has run every round asked
// of it so far.
func waitTrims(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	if !queueTrim(trimJob{done: done}) {
		t.Fatal("the trimming goroutine is 1024 rounds behind")
	}
	<-done
}

// mostly reports whether n of total pages is nearly all of them. The
// kernel may reclaim a few clean pages of any file under memory pressure,
// which is not the log's doing; a drop by the log takes them all.
func mostly(n, total int) bool {
	return n*8 >= total*7
}

func count(pages []bool) (n int) {
	for _, in := range pages {
		if in {
			n++
		}
	}
	return n
}

// cacheTestDir answers a directory for a page-cache test and whether the
// kernel can drop its files' pages: not on tmpfs, whose pages are the files
// themselves. The test's temporary directory is tried first, then one
// beside the package's sources.
func cacheTestDir(t *testing.T) (string, bool) {
	t.Helper()
	droppable := func(dir string) bool {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		return st.Type != unix.TMPFS_MAGIC
	}
	if dir := t.TempDir(); droppable(dir) {
		return dir, true
	}
	dir, err := os.MkdirTemp(".", "cache-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, droppable(dir)
}

// The bytes of the active segment more than a window behind its end leave
// the page cache once written back; the window stays; and with no window
// (the default) the log drops nothing and what was written stays cached,
// but for what the kernel reclaims on its own. Where no directory can
// drop pages (tmpfs only), the log must still have asked for the drop.
func TestCacheWindowDropsWrittenBackBytes(t *testing.T) {
	for _, tc := range []struct {
		window   int64
		wantGone bool
	}{{window: 2 << 20, wantGone: true}, {window: 0}} {
		dir, droppable := cacheTestDir(t)
		l, err := Open(dir, DefaultConfig(), Options{CacheWindow: tc.window})
		if err != nil {
			t.Fatal(err)
		}
		// 20 MiB, each batch fsynced: every page is clean when it falls
		// out of the window, so the drop is not racing the write-back.
		for i := range 320 {
			if _, err := l.Append(valuesBatch(t, i*16, 16, 4000, 1), 0); err != nil {
				t.Fatal(err)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		waitTrims(t)
		path := l.active().path(logSuffix)
		size, dropped := l.active().size, l.active().dropped
		head := resident(t, path, 0, 8<<20)
		tail := resident(t, path, (size-1<<20)&^0xfff, 1<<20)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.wantGone && !droppable:
			if dropped < 8<<20 {
				t.Errorf("window %d: the log asked for %d bytes to be dropped, want at least the first 8 MiB", tc.window, dropped)
			}
		case tc.wantGone:
			if n := count(head); n != 0 {
				t.Errorf("window %d: %d of the first %d pages still cached, want none", tc.window, n, len(head))
			}
		default:
			if dropped != 0 {
				t.Errorf("no window: the log asked for %d bytes to be dropped, want none", dropped)
			}
			if n := count(head); !mostly(n, len(head)) {
				t.Errorf("no window: %d of the first %d pages cached, want nearly all", n, len(head))
			}
		}
		if n := count(tail); !mostly(n, len(tail)) {
			t.Errorf("window %d: %d of the last %d pages cached, want nearly all", tc.window, n, len(tail))
		}
	}
}
