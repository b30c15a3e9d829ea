package log

import (
	"os"
	"sync"
)

// Bounding a log's page cache. A log is read mostly near its end: followers
// within milliseconds of an append, tailing consumers within seconds. What
// lies further back is read again only by a consumer catching up, yet the
// kernel keeps every written page cached until memory runs short, so a
// node's page cache grows with everything it writes. Where that growth is
// dear, a log can keep only its newest bytes cached (Options.CacheWindow):
// as the active segment grows, the bytes that fall more than the window
// behind its end are handed to the disk (an asynchronous write-back), and
// a few megabytes later, written back by then, dropped from the cache. New
// appends then take the pages just dropped instead of memory the kernel
// has not used yet.
//
// That growth is dear on a virtual machine whose host takes back the memory
// its guest leaves free (free page reporting or a balloon): every page the
// cache grows into is memory the host must hand out again. On the 2-core
// test machine a MiB of it costs 1.6-3.5 ms of kernel CPU against 0.2-0.5
// ms for memory freed moments before, a third to a half of what a replica
// spends on a record. On a machine whose memory is already full of cache,
// new pages come from reclaiming old ones and the window changes little but
// the cache's contents.
//
// Nothing here changes what is on disk or when it is durable (fsyncs are
// flush.messages' and flush.ms's): the write-back is the one the kernel
// would start anyway within its dirty-expiry time, started sooner, and a
// dropped page is read back from the disk when asked for. The calls are
// advice: when one fails, the page stays cached, as it would without a
// window. Bytes read back into the cache after they were dropped are left
// there (the drop moves forward only), so a consumer catching up does not
// have its read-ahead dropped under it.

// cacheStep is how many bytes must fall out of the window before they are
// handed to the disk in one call. Small steps keep each call's share of
// I/O small: on the 2-core test machine 4 MiB steps, which every partition
// of a node took at about the same moment, stalled every process on the
// machine for 10-20 ms several times a second.
const cacheStep = 512 << 10

// cacheDropLag is how far behind the bytes handed to the disk the drop
// follows: a write-back started that many bytes ago has ended (the drop
// leaves pages still being written cached, for good).
const cacheDropLag = 4 << 20

// cacheDropStep is how many bytes are dropped in one call, at least. Drops
// as small as the write-back's steps cost a partition whose every batch is
// fsynced (its pages are clean at once) a sixth of its rate on the test
// machine; drops of 4 MiB stalled the machine as the write-back did.
const cacheDropStep = 2 << 20

// cacheAlign: the bounds of what is handed over and dropped are multiples
// of it, so that they fall on page boundaries (a page that a dropped range
// covers only in part stays cached) whatever the machine's page size.
const cacheAlign = 64 << 10

// trimJob is one round of advice for one file: drop [dropOff,
// dropOff+dropLen) from the cache, hand [wbOff, wbOff+wbLen) to the disk.
// done, when not nil, is closed once the round has run.
type trimJob struct {
	f                *os.File
	dropOff, dropLen int64
	wbOff, wbLen     int64
	done             chan struct{}
}

// The advice is given by one goroutine for the whole process, never by the
// append that asks for it: a drop that finds a page still in another CPU's
// LRU batch drains every CPU's batch and waits for it, which on a busy
// machine takes milliseconds that a partition's writer must not wait.
var trimmer struct {
	once sync.Once
	jobs chan trimJob
}

// queueTrim hands job to the trimming goroutine, starting it if needed,
// and reports whether it took it (false when it is that far behind).
func queueTrim(job trimJob) bool {
	trimmer.once.Do(func() {
		trimmer.jobs = make(chan trimJob, 1024)
		go func() {
			for j := range trimmer.jobs {
				if j.dropLen > 0 {
					dropCache(j.f, j.dropOff, j.dropLen)
				}
				if j.wbLen > 0 {
					handToDisk(j.f, j.wbOff, j.wbLen)
				}
				if j.done != nil {
					close(j.done)
				}
			}
		}()
	})
	select {
	case trimmer.jobs <- job:
		return true
	default:
		return false
	}
}

// trimCache asks for the bytes of s more than window behind its end to be
// handed to the disk, and for those handed over cacheDropLag before to be
// dropped from the cache (nextTrim). Called with wmu held, after an append
// to s. A round the trimming goroutine cannot take now is asked for again,
// larger, by the next append.
func (s *segment) trimCache(window int64) {
	job, ok := s.nextTrim(window)
	if !ok || !queueTrim(job) {
		return
	}
	s.dropped, s.wb = job.dropOff+job.dropLen, job.wbOff+job.wbLen
}

// nextTrim answers the round of advice s is due for its window, if any:
// once cacheStep more bytes have fallen out of the window, hand them to
// the disk, and once cacheDropStep of those handed over cacheDropLag
// before are still cached, drop them.
func (s *segment) nextTrim(window int64) (trimJob, bool) {
	s.wb, s.dropped = min(s.wb, s.size), min(s.dropped, s.size) // after a truncation
	limit := (s.size - window) &^ (cacheAlign - 1)
	if limit-s.wb < cacheStep {
		return trimJob{}, false
	}
	dropTo := max(s.wb-cacheDropLag, s.dropped)
	if dropTo-s.dropped < cacheDropStep {
		dropTo = s.dropped
	}
	return trimJob{f: s.f, dropOff: s.dropped, dropLen: dropTo - s.dropped, wbOff: s.wb, wbLen: limit - s.wb}, true
}

// dropTail asks for what s still has cached of the bytes not dropped yet
// to be dropped, when s stops being the active segment; pages still being
// written back stay until the kernel reclaims them, about a window's worth.
func (s *segment) dropTail() {
	if s.size > s.dropped && queueTrim(trimJob{f: s.f, dropOff: s.dropped, dropLen: s.size - s.dropped}) {
		s.dropped = s.size
	}
}
