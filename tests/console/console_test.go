//go:build integration

package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"skein/tests/e2e"
)

// chromium finds a chromium binary, "" when none is installed.
func chromium() string {
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	return ""
}

// devCluster is `skein dev --console-demos` on free ports.
type devCluster struct {
	base string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startDev(t *testing.T) *devCluster {
	t.Helper()
	bin, err := e2e.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "skein")); err != nil {
		t.Fatalf("%s/skein not built (run make build): %v", bin, err)
	}
	httpAddr, err := e2e.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	grpcAddr, err := e2e.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d := &devCluster{base: "http://" + httpAddr, out: &lockedBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(filepath.Join(bin, "skein"), "dev", "--data-dir", dir, "--bin-dir", bin,
		"--gateway-http-addr", httpAddr, "--gateway-grpc-addr", grpcAddr, "--console-demos")
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
			t.Errorf("skein dev did not stop within 30 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("skein dev:\n%s", d.out)
		}
	})
	deadline := time.After(90 * time.Second)
	for !strings.Contains(d.out.String(), "Skein is running.") {
		select {
		case <-d.done:
			t.Fatalf("skein dev exited:\n%s", d.out)
		case <-deadline:
			t.Fatalf("skein dev not ready after 90 s:\n%s", d.out)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return d
}

// shotDir is $SKEIN_CONSOLE_SCREENSHOTS, else a directory of the test's.
func shotDir(t *testing.T) string {
	if d := os.Getenv("SKEIN_CONSOLE_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// pageErrors collects what the page reports as errors: uncaught
// exceptions, console.error calls and the browser's own error log entries
// (a resource that failed to load).
type pageErrors struct {
	mu   sync.Mutex
	errs []string
}

func (p *pageErrors) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, s)
}

func (p *pageErrors) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// waitJS waits until the expression is true in the page.
func waitJS(expr string, timeout time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(timeout))(ctx, t)
		return err
	})
}

// partitionRow is the JavaScript expression of a partition's row.
func partitionRow(topic string, p int) string {
	return fmt.Sprintf(`document.querySelector('tr.partition[data-topic="%s"][data-partition="%d"]')`, topic, p)
}

func TestConsole(t *testing.T) {
	chrome := chromium()
	if chrome == "" {
		t.Skip("no chromium binary installed (tests/console/install.sh installs Debian's): the console's browser test needs one")
	}
	d := startDev(t)
	shots := shotDir(t)
	t.Logf("screenshots in %s", shots)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 1800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", chrome, err)
	}

	// Everything the page reports as an error: uncaught exceptions,
	// console.error and console.assert calls, and the browser's own error
	// entries (a resource that failed to load).
	var perrs pageErrors
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	consoleCalls := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	logEntries := chromedp.Events(ctx, cdplog.EntryAdded)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			det := ev.ExceptionDetails
			desc := det.Text
			if det.Exception != nil {
				desc += " " + det.Exception.Description
			}
			perrs.add(fmt.Sprintf("exception: %s (%s:%d)", desc, det.URL, det.LineNumber+1))
		}
	}()
	go func() {
		for ev, err := range consoleCalls {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				perrs.add("console." + string(ev.Type) + ": " + strings.Join(args, " "))
			}
		}
	}()
	go func() {
		for ev, err := range logEntries {
			if err != nil {
				return
			}
			if ev.Entry.Level == cdplog.EntryLevelError {
				perrs.add("log: " + ev.Entry.Text + " " + ev.Entry.URL)
			}
		}
	}()
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}

	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			buf, err := chromedp.FullScreenshot(100)(ctx, t)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name), buf, 0o644)
		})
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			pageLog, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('event-log').innerText`))
			_ = chromedp.Do(ctx, shot("failed.png"))
			t.Fatalf("%s: %v\npage errors: %v\nthe page's log:\n%s", step, err, perrs.list(), pageLog)
		}
	}
	start := time.Now()

	// 1. The page loads and goes live, with no errors.
	run("load",
		chromedp.Navigate(d.base+"/console/"),
		waitJS(`document.getElementById('conn-status').textContent === 'live' &&
			document.querySelectorAll('#brokers tbody tr').length === 3 &&
			document.querySelectorAll('#controllers tbody tr td.state-ALIVE').length === 3 &&
			document.querySelectorAll('button[data-action="kill"]').length === 3`, 20*time.Second),
		shot("01-loaded.png"))
	if e := perrs.list(); len(e) > 0 {
		t.Fatalf("the page reported errors on load: %v", e)
	}
	t.Logf("loaded and live after %v", time.Since(start).Round(time.Millisecond))

	// 2. A topic created from the page gets its partition rows, each with
	// a leader and three replicas in sync.
	const topic = "console-demo"
	run("create topic",
		chromedp.SetValue(chromedp.CSS("#topic-name"), topic),
		chromedp.Click(chromedp.CSS("#create-topic-btn")),
		waitJS(fmt.Sprintf(`[...document.querySelectorAll('tr.partition[data-topic="%s"]')].filter(r => Number(r.dataset.leader) > 0 && r.dataset.isr.split(',').length === 3).length === 3`, topic), 15*time.Second),
		shot("02-topic.png"))

	// 3. Producing with acks=all from the page moves the high watermarks,
	// and the log bars show committed records.
	run("produce",
		waitJS(fmt.Sprintf(`document.getElementById('produce-topic').value === '%s'`, topic), 5*time.Second),
		chromedp.SetValue(chromedp.CSS("#produce-count"), "30"),
		chromedp.Click(chromedp.CSS("#produce-all")),
		waitJS(`document.querySelector('#produce-results li.ok[data-acks="all"]') !== null`, 15*time.Second),
		waitJS(fmt.Sprintf(`[...document.querySelectorAll('tr.partition[data-topic="%[1]s"]')].reduce((s, r) => s + Number(r.dataset.hw), 0) === 30 &&
			document.querySelectorAll('tr.partition[data-topic="%[1]s"] .bar .committed').length > 0`, topic), 10*time.Second),
		// One log bar per replica: the leader's and both followers' log
		// ends reach the 30 records.
		waitJS(fmt.Sprintf(`[...document.querySelectorAll('tr.partition[data-topic="%s"] .replica .nums')].filter(n => n.textContent === 'LEO 30').length === 3`, topic), 10*time.Second),
		shot("03-produced.png"))
	t.Logf("produce: %s", eval(`document.querySelector('#produce-results li.ok').textContent`))

	// 4. Killing partition 0's leader with the demo button: the page shows
	// a new leader at a higher epoch within seconds.
	leader := eval(partitionRow(topic, 0) + `.dataset.leader`)
	epoch := eval(partitionRow(topic, 0) + `.dataset.epoch`)
	killed := time.Now()
	run("kill the leader",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action="kill"][data-node="%s"]`, leader))),
		waitJS(fmt.Sprintf(`(r => Number(r.dataset.leader) > 0 && r.dataset.leader !== '%s' && Number(r.dataset.epoch) > %s)(%s)`,
			leader, epoch, partitionRow(topic, 0)), 10*time.Second))
	t.Logf("partition 0: leader %s killed; the page showed leader %s at epoch %s after %v", leader,
		eval(partitionRow(topic, 0)+`.dataset.leader`), eval(partitionRow(topic, 0)+`.dataset.epoch`), time.Since(killed).Round(time.Millisecond))
	run("the killed broker is fenced and out of the ISR",
		waitJS(fmt.Sprintf(`document.querySelector('#brokers tr[data-broker="%s"]').dataset.state === 'FENCED' &&
			!%s.dataset.isr.split(',').includes('%s')`, leader, partitionRow(topic, 0), leader), 10*time.Second),
		shot("04-leader-killed.png"))

	// 5. The audit button reads the log back: the 30 records the page had
	// acknowledged with acks=all are all still there after the kill, but
	// for the first half of one partition's, deleted on purpose
	// (delete-records moves its log start past them), which the audit
	// tells apart from lost ones.
	cut, cutHW := -1, 0
	for p := 0; p <= 2 && cut < 0; p++ {
		if hw, _ := strconv.Atoi(eval(partitionRow(topic, p) + `.dataset.hw`)); hw >= 2 {
			cut, cutHW = p, hw
		}
	}
	if cut < 0 {
		t.Fatalf("no partition of %s holds 2 records or more", topic)
	}
	resp, err := http.Post(d.base+"/v1/topics/"+topic+"/records:delete", "application/json",
		strings.NewReader(fmt.Sprintf(`{"partitions": [{"partition": %d, "offset": %d}]}`, cut, cutHW/2)))
	if err != nil {
		t.Fatal(err)
	}
	var deleted struct {
		Partitions []struct {
			ErrorCode string `json:"error_code"`
		} `json:"partitions"`
	}
	err = json.NewDecoder(resp.Body).Decode(&deleted)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(deleted.Partitions) != 1 || deleted.Partitions[0].ErrorCode != "NONE" {
		t.Fatalf("deleting partition %d's records: %d %+v %v", cut, resp.StatusCode, deleted, err)
	}
	run("audit the acknowledged records",
		chromedp.Click(chromedp.CSS("#audit")),
		waitJS(`document.querySelector('#produce-results li[data-audit]') !== null`, 15*time.Second),
		shot("05-audit.png"))
	auditText := eval(`document.querySelector('#produce-results li[data-audit]').textContent`)
	if got := eval(`document.querySelector('#produce-results li[data-audit]').dataset.audit`); got != "0,0" {
		t.Errorf("audit after the kill: lost (acks=1, acks=all) = %s, want 0,0: %s", got, auditText)
	}
	if want := fmt.Sprintf("acks=all — %d still in the log, 0 lost; and %d acknowledged record(s) below the log start", 30-cutHW/2, cutHW/2); !strings.Contains(auditText, want) {
		t.Errorf("audit after %d of partition %d's records were deleted: %q, want %q", cutHW/2, cut, auditText, want)
	}
	t.Logf("audit: %s", eval(`document.querySelector('#produce-results li[data-audit]').textContent`))

	// Exceptions and console errors fail the test whenever they happen;
	// after the kill, the browser may log a failed request of the page.
	for _, e := range perrs.list() {
		if !strings.HasPrefix(e, "log: ") {
			t.Errorf("page error: %s", e)
		}
	}
	t.Logf("the whole page test took %v", time.Since(start).Round(time.Millisecond))
}
