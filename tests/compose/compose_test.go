//go:build compose

package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"skein/libs/loopback"
)

// project is the compose project name: containers, the network and the
// volumes are all prefixed with it, so the test never touches a cluster a
// user started from the same file.
const project = "skeintest"

var images = []string{"skein/controller:dev", "skein/storage:dev", "skein/groupcoord:dev", "skein/txncoord:dev", "skein/gateway:dev", "jaegertracing/jaeger:2.13.0"}

func TestCompose(t *testing.T) {
	start := time.Now()
	c := newCluster(t)
	c.up()
	t.Logf("cluster up and serving in %v", time.Since(start).Round(time.Second))

	topic := "orders"
	c.createTopic(topic, 3, 2)
	leader, isr := c.waitISR(topic, 3, 60*time.Second, nil)
	t.Logf("topic %s: leader %d, isr %v", topic, leader, isr)

	phase(t, "basic", "produce and consume through the gateway", func() {
		var acked []produced
		for i := range 20 {
			p, err := c.produce(topic, fmt.Sprintf("hello-%02d", i))
			if err != nil {
				c.fatalf("produce %d: %v", i, err)
			}
			acked = append(acked, p)
		}
		c.checkReadBack(topic, acked)
	})

	phase(t, "trace", "one produce's trace in Jaeger spans the gateway, the leader and both followers", func() {
		c.checkTrace()
	})

	var killed string
	phase(t, "kill", "docker kill the partition leader under acks=all produces", func() {
		killed = c.killLeaderUnderLoad(topic)
	})

	phase(t, "kill", "the killed node restarts and rejoins the ISR", func() {
		c.docker(60*time.Second, "start", killed)
		c.waitISR(topic, 3, 90*time.Second, nil)
	})

	phase(t, "cutleader", "the partition leader cut off the network: acks=all produces resume after the election", func() {
		c.cutLeaderUnderLoad(topic, false)
	})

	phase(t, "cutpartial", "the partition leader cut off from its followers and the gateway, not from the controllers: leadership moves", func() {
		c.cutLeaderUnderLoad(topic, true)
	})

	phase(t, "cutfollower", "a follower cut off the network for a minute leaves the ISR and comes back by itself", func() {
		c.partitionFollower(topic)
	})

	phase(t, "cutcontroller", "the Raft leader cut off for a minute rejoins the quorum and gossip", func() {
		c.partitionController()
	})
	t.Logf("whole test %v (before docker compose down -v)", time.Since(start).Round(time.Second))
}

// phase runs one step of the test. SKEIN_COMPOSE_PHASES (a comma-separated
// list of keys: basic, trace, kill, cutleader, cutfollower, cutcontroller)
// runs only those, to repeat one scenario while debugging it; unset, all run.
func phase(t *testing.T, key, name string, f func()) {
	t.Helper()
	if only := os.Getenv("SKEIN_COMPOSE_PHASES"); only != "" && !slices.Contains(strings.Split(only, ","), key) {
		t.Logf("--- %s: skipped (SKEIN_COMPOSE_PHASES=%s)", name, only)
		return
	}
	start := time.Now()
	t.Logf("--- %s", name)
	f()
	t.Logf("--- %s: done in %v", name, time.Since(start).Round(100*time.Millisecond))
}

type cluster struct {
	t        *testing.T
	compose  []string // "docker compose" or "docker-compose"
	v2       bool
	files    []string // -f each, in order
	env      []string
	rest     string // http://127.0.0.1:PORT of the gateway's REST API
	jaeger   string // http://127.0.0.1:PORT of Jaeger's query API
	http     *http.Client
	deadline time.Time // waits give up before the test binary's -timeout

	failures []string // what failed, repeated after the logs at the end
}

// fatalf and errorf fail the test as t.Fatalf and t.Errorf do and keep the
// message, so that it is printed once more after the containers' logs: a CI
// log cut to its last lines still says what failed.
func (c *cluster) fatalf(format string, args ...any) {
	c.t.Helper()
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
	c.t.Fatalf(format, args...)
}

func (c *cluster) errorf(format string, args ...any) {
	c.t.Helper()
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
	c.t.Errorf(format, args...)
}

func newCluster(t *testing.T) *cluster {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Fatalf("the compose test needs Docker, and no docker command is on PATH: %v", err)
	}
	if out, err := exec.Command(docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("the compose test needs a running Docker engine; `docker info` failed: %v\n%s", err, out)
	}
	c := &cluster{t: t, http: &http.Client{Timeout: 45 * time.Second}}
	if out, err := exec.Command(docker, "compose", "version").CombinedOutput(); err == nil {
		c.compose, c.v2 = []string{docker, "compose"}, true
	} else if dc, err2 := exec.LookPath("docker-compose"); err2 == nil {
		c.compose = []string{dc}
	} else {
		t.Fatalf("the compose test needs Docker Compose: neither `docker compose` (%v: %s) nor docker-compose (%v) is available", err, bytes.TrimSpace(out), err2)
	}
	for _, im := range images {
		if out, err := exec.Command(docker, "image", "inspect", "--format", "{{.Id}}", im).CombinedOutput(); err != nil {
			t.Fatalf("image %s is missing (%s): run `make images jaeger-image` first (`make compose-test` does)", im, bytes.TrimSpace(out))
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	c.files = []string{filepath.Join(root, "docker-compose.yml")}
	ports := loopback.Addrs(t, 3)
	for i, a := range ports {
		_, p, _ := net.SplitHostPort(a)
		ports[i] = p
	}
	restPort, grpcPort, jaegerPort := ports[0], ports[1], ports[2]
	c.env = append(os.Environ(), "SKEIN_REST_PORT="+restPort, "SKEIN_GRPC_PORT="+grpcPort, "JAEGER_QUERY_PORT="+jaegerPort)
	c.rest, c.jaeger = "http://127.0.0.1:"+restPort, "http://127.0.0.1:"+jaegerPort

	c.deadline = time.Now().Add(10 * time.Minute)
	if d, ok := t.Deadline(); ok {
		c.deadline = d.Add(-60 * time.Second)
		// Past -timeout the test binary panics and no Cleanup runs: take the
		// cluster down just before that ourselves.
		alarm := time.AfterFunc(time.Until(d.Add(-30*time.Second)), func() {
			fmt.Fprintln(os.Stderr, "compose test: the -timeout is near; docker compose down -v")
			c.down()
		})
		t.Cleanup(func() { alarm.Stop() })
	}
	// Ctrl-C or SIGTERM ends the test binary without Cleanup: take the
	// cluster down first.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sigs; ok {
			fmt.Fprintln(os.Stderr, "compose test: interrupted; docker compose down -v")
			c.down()
			os.Exit(1)
		}
	}()
	t.Cleanup(func() { signal.Stop(sigs); close(sigs) })
	// A run that was killed may have left the project behind.
	c.down()
	t.Cleanup(c.down)
	t.Cleanup(func() {
		if dir := os.Getenv("SKEIN_COMPOSE_LOGS"); dir != "" {
			// Every service's whole log, for reading a run afterwards.
			if err := os.MkdirAll(dir, 0o755); err == nil {
				for _, svc := range strings.Fields(c.composeRunQuiet("config", "--services")) {
					out, _ := c.composeOut(2*time.Minute, "logs", "--no-color", "--no-log-prefix", svc)
					_ = os.WriteFile(filepath.Join(dir, svc+".log"), []byte(out), 0o644)
				}
				t.Logf("services' logs written to %s", dir)
			}
		}
		if t.Failed() {
			out, _ := c.composeOut(2*time.Minute, "logs", "--no-color", "--tail=60")
			t.Logf("docker compose logs (last lines per service):\n%s", out)
			t.Logf("compose test failed:\n\t%s", strings.Join(c.failures, "\n\t"))
		}
	})
	t.Logf("compose: %s, project %s, REST %s, Jaeger %s", strings.Join(c.compose, " "), project, c.rest, c.jaeger)
	return c
}

// composeOut runs docker compose -p project -f file args... and returns its
// combined output.
func (c *cluster) composeOut(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := append(slices.Clone(c.compose[1:]), "-p", project)
	for _, f := range c.files {
		full = append(full, "-f", f)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, c.compose[0], full...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *cluster) composeRun(timeout time.Duration, args ...string) string {
	c.t.Helper()
	out, err := c.composeOut(timeout, args...)
	if err != nil {
		c.fatalf("%s %s: %v\n%s", strings.Join(c.compose, " "), strings.Join(args, " "), err, out)
	}
	return out
}

// composeRunQuiet answers a compose command's output, or "" on failure.
func (c *cluster) composeRunQuiet(args ...string) string {
	out, err := c.composeOut(time.Minute, args...)
	if err != nil {
		return ""
	}
	return out
}

func (c *cluster) down() {
	if out, err := c.composeOut(3*time.Minute, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
		fmt.Fprintf(os.Stderr, "compose test: docker compose down -v: %v\n%s", err, out)
	}
}

func (c *cluster) docker(timeout time.Duration, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		c.fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// up starts the project and waits for every health check, then for the
// cluster to know its three storage nodes.
func (c *cluster) up() {
	if c.v2 {
		c.composeRun(5*time.Minute, "up", "-d", "--wait")
	} else {
		// Compose v1 has no --wait; it does gate each service on its
		// dependencies' health, and the loop below waits for the rest.
		c.composeRun(5*time.Minute, "up", "-d")
	}
	ids := strings.Fields(c.composeRun(time.Minute, "ps", "-q"))
	if len(ids) != 12 {
		c.fatalf("want 12 containers (jaeger, 3 controllers, 3 storage nodes, 2 group and 2 transaction coordinators, gateway), got %d: %v", len(ids), ids)
	}
	c.eventually(2*time.Minute, "every container healthy", func() error {
		for _, id := range ids {
			st := c.docker(time.Minute, "inspect", "--format", "{{.Name}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}", id)
			if f := strings.Fields(st); len(f) != 3 || f[1] != "running" || (f[2] != "healthy" && f[2] != "none") {
				return fmt.Errorf("%s", st)
			}
		}
		return nil
	})
	c.eventually(2*time.Minute, "the gateway sees 3 live brokers", func() error {
		var cl struct {
			Brokers []struct {
				ID    int32  `json:"id"`
				State string `json:"state"`
			} `json:"brokers"`
		}
		if err := c.getJSON("/v1/cluster", &cl); err != nil {
			return err
		}
		alive := 0
		for _, b := range cl.Brokers {
			if b.State == "ALIVE" {
				alive++
			}
		}
		if alive != 3 {
			return fmt.Errorf("brokers %+v", cl.Brokers)
		}
		return nil
	})
}

// eventually retries f every 250ms until it succeeds, failing the test after
// timeout (or at the test's own deadline).
func (c *cluster) eventually(timeout time.Duration, what string, f func() error) {
	c.t.Helper()
	end := time.Now().Add(timeout)
	if end.After(c.deadline) {
		end = c.deadline
	}
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		if time.Now().After(end) {
			c.fatalf("waited %v for %s: %v", timeout, what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ---- the REST API ----

// jnum reads a protobuf JSON integer, which may be a number or a string.
type jnum int64

func (n *jnum) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	*n = jnum(v)
	return err
}

func (c *cluster) do(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.rest+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *cluster) getJSON(path string, out any) error { return c.do("GET", path, nil, out) }

func (c *cluster) createTopic(name string, rf, minISR int) {
	c.t.Helper()
	body := map[string]any{"name": name, "partitions": 1, "replication_factor": rf,
		"configs": map[string]string{"min.insync.replicas": strconv.Itoa(minISR)}}
	c.eventually(30*time.Second, "topic "+name+" created", func() error {
		err := c.do("POST", "/v1/topics", body, nil)
		if err != nil && strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return nil
		}
		return err
	})
}

type partitionDesc struct {
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	HW        jnum    `json:"high_watermark"`
}

func (c *cluster) describe(topic string) (partitionDesc, error) {
	var d struct {
		Partitions []partitionDesc `json:"partitions"`
	}
	if err := c.getJSON("/v1/topics/"+topic, &d); err != nil {
		return partitionDesc{}, err
	}
	if len(d.Partitions) != 1 {
		return partitionDesc{}, fmt.Errorf("topic %s has %d partitions", topic, len(d.Partitions))
	}
	return d.Partitions[0], nil
}

// waitISR waits until partition 0 of topic has a leader and an ISR of want
// members satisfying ok (if given), and returns them.
func (c *cluster) waitISR(topic string, want int, timeout time.Duration, ok func([]int32) bool) (int32, []int32) {
	c.t.Helper()
	var p partitionDesc
	c.eventually(timeout, fmt.Sprintf("%s to have a leader and an ISR of %d", topic, want), func() (err error) {
		if p, err = c.describe(topic); err != nil {
			return err
		}
		if p.Leader < 0 || len(p.ISR) != want || (ok != nil && !ok(p.ISR)) {
			return fmt.Errorf("leader %d, isr %v", p.Leader, p.ISR)
		}
		return nil
	})
	return p.Leader, p.ISR
}

type produced struct {
	value  string
	offset int64
	at     time.Time // when the acknowledgement arrived
}

// produce writes one record to partition 0 with acks=all.
func (c *cluster) produce(topic, value string) (produced, error) {
	var resp struct {
		Results []struct {
			Offset    jnum   `json:"offset"`
			ErrorCode string `json:"error_code"`
			Message   string `json:"message"`
		} `json:"results"`
	}
	body := map[string]any{"acks": -1, "records": []map[string]any{{"value": value, "partition": 0}}}
	if err := c.do("POST", "/v1/topics/"+topic+"/records", body, &resp); err != nil {
		return produced{}, err
	}
	if len(resp.Results) != 1 {
		return produced{}, fmt.Errorf("%d results for 1 record", len(resp.Results))
	}
	if r := resp.Results[0]; r.ErrorCode != "NONE" || r.Offset < 0 {
		return produced{}, fmt.Errorf("%s: %s (offset %d)", r.ErrorCode, r.Message, r.Offset)
	}
	return produced{value, int64(resp.Results[0].Offset), time.Now()}, nil
}

// readAll reads partition 0 from offset 0 up to its high watermark, and
// on to at least offset want for up to 30 s: a leader elected a moment ago
// may not have advanced its high watermark to its predecessor's yet (its
// followers' next fetch does that), and an acknowledged record above it
// is not lost for that.
func (c *cluster) readAll(topic string, want int64) (map[int64]string, int64) {
	c.t.Helper()
	got := map[int64]string{}
	next := int64(0)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var f struct {
			Records []struct {
				Offset jnum   `json:"offset"`
				Value  string `json:"value"`
			} `json:"records"`
			Next jnum `json:"next_offset"`
			HW   jnum `json:"high_watermark"`
		}
		path := fmt.Sprintf("/v1/topics/%s/partitions/0/records?offset=%d&max_records=500&max_wait_ms=200", topic, next)
		c.eventually(30*time.Second, "a fetch", func() error { return c.getJSON(path, &f) })
		for _, r := range f.Records {
			got[int64(r.Offset)] = r.Value
		}
		if int64(f.Next) > next {
			next = int64(f.Next)
		}
		if next >= int64(f.HW) && (next >= want || time.Now().After(deadline)) {
			return got, next
		}
	}
}

// checkReadBack reads the partition back and checks every acknowledged
// record is there, at its offset, exactly once.
func (c *cluster) checkReadBack(topic string, acked []produced) {
	c.t.Helper()
	want := int64(0)
	for _, p := range acked {
		want = max(want, p.offset+1)
	}
	got, end := c.readAll(topic, want)
	count := map[string]int{}
	for _, v := range got {
		count[v]++
	}
	lost := 0
	for _, p := range acked {
		if got[p.offset] != p.value {
			lost++
			if lost <= 10 {
				c.errorf("acknowledged %q at offset %d; the log has %q there", p.value, p.offset, got[p.offset])
			}
		}
		if count[p.value] > 1 {
			c.errorf("acknowledged %q is in the log %d times", p.value, count[p.value])
		}
	}
	if lost > 0 {
		c.fatalf("%d of %d acknowledged records lost", lost, len(acked))
	}
	c.t.Logf("read back %d records (up to offset %d): all %d acknowledged ones at their offsets, once", len(got), end, len(acked))
}

// ---- containers ----

// container is the container id of a compose service.
func (c *cluster) container(service string) string {
	c.t.Helper()
	id := strings.TrimSpace(c.composeRun(time.Minute, "ps", "-q", service))
	if id == "" {
		c.fatalf("no container for service %s", service)
	}
	return id
}

func storageService(broker int32) string { return fmt.Sprintf("storage-%d", broker) }

// loader produces acks=all records one request at a time until stopped,
// keeping what was acknowledged and what failed.
type loader struct {
	mu     sync.Mutex
	acked  []produced
	failed []string
	stop   chan struct{}
	done   chan struct{}
}

func (c *cluster) startLoad(topic, prefix string) *loader {
	l := &loader{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			v := fmt.Sprintf("%s-%06d", prefix, i)
			t0 := time.Now()
			p, err := c.produce(topic, v)
			l.mu.Lock()
			if err != nil {
				l.failed = append(l.failed, fmt.Sprintf("%s at %s after %v: %v", v, t0.Format("15:04:05.000"), time.Since(t0).Round(time.Millisecond), err))
			} else {
				l.acked = append(l.acked, p)
			}
			l.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return l
}

func (l *loader) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *loader) finish() ([]produced, []string) {
	close(l.stop)
	<-l.done
	return l.acked, l.failed
}

// killLeaderUnderLoad docker-kills the partition leader while acks=all
// produces run, and checks that they keep succeeding and that every
// acknowledged record survives. It returns the killed container.
func (c *cluster) killLeaderUnderLoad(topic string) string {
	c.t.Helper()
	p, err := c.describe(topic)
	if err != nil {
		c.fatalf("%v", err)
	}
	old := p.Leader
	id := c.container(storageService(old))
	l := c.startLoad(topic, "failover")
	c.eventually(30*time.Second, "acks=all produces before the kill", func() error {
		if n := l.count(); n < 50 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	before := l.count()
	c.docker(time.Minute, "kill", id)
	killedAt := time.Now()
	c.t.Logf("docker kill %s (leader, broker %d) after %d acknowledged produces", storageService(old), old, before)
	newLeader, isr := c.waitISR(topic, 2, 60*time.Second, func(isr []int32) bool { return !slices.Contains(isr, old) })
	c.t.Logf("new leader %d after %v, isr %v", newLeader, time.Since(killedAt).Round(time.Millisecond), isr)
	c.eventually(60*time.Second, "acks=all produces after the kill", func() error {
		if n := l.count(); n < before+100 || time.Since(killedAt) < 5*time.Second {
			return fmt.Errorf("%d acknowledged after the kill", n-before)
		}
		return nil
	})
	acked, failed := l.finish()
	c.t.Logf("%d acks=all produces acknowledged (%d after the kill), %d failed", len(acked), len(acked)-before, len(failed))
	for _, f := range failed {
		c.errorf("produce failed: %s", f)
	}
	c.checkReadBack(topic, acked)
	return id
}

// cutLength is how long the partition phases keep a node off the network:
// far longer than gossip keeps talking to a member it declared dead, so the
// node comes back only if the reconnect loop works.
const cutLength = 60 * time.Second

// disconnect takes a container off the compose network and returns the
// function that puts it back under the same aliases.
func (c *cluster) disconnect(svc string) (reconnect func()) {
	c.t.Helper()
	id := c.container(svc)
	var nets map[string]struct {
		Aliases   []string `json:"Aliases"`
		IPAddress string   `json:"IPAddress"`
	}
	if err := json.Unmarshal([]byte(c.docker(time.Minute, "inspect", "--format", "{{json .NetworkSettings.Networks}}", id)), &nets); err != nil || len(nets) != 1 {
		c.fatalf("networks of %s: %v %v", svc, nets, err)
	}
	var network, ip string
	var aliases []string
	for n, v := range nets {
		network, aliases, ip = n, v.Aliases, v.IPAddress
	}
	c.docker(time.Minute, "network", "disconnect", network, id)
	c.t.Logf("docker network disconnect %s %s (%s)", network, svc, ip)
	return func() {
		args := []string{"network", "connect"}
		for _, a := range aliases {
			args = append(args, "--alias", a) // the service name, which the others dial
		}
		c.docker(time.Minute, append(args, network, id)...)
		newIP := c.docker(time.Minute, "inspect", "--format", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", id)
		c.t.Logf("docker network connect %s %s (%s)", network, svc, newIP)
	}
}

// followers lists the partition's replicas other than its leader.
func followers(p partitionDesc) []string {
	var out []string
	for _, r := range p.Replicas {
		if r != p.Leader {
			out = append(out, storageService(r))
		}
	}
	return out
}

// cutFromPeers cuts svc off from the named services only: blackhole routes
// to their addresses inside svc's network namespace (entered with nsenter
// from the host, since the images hold nothing but their binary), so svc's
// packets to them — and its answers to theirs — go nowhere while every
// other service, the controllers among them, still reaches svc. It returns
// the function that removes the routes.
func (c *cluster) cutFromPeers(svc string, names []string) (heal func()) {
	c.t.Helper()
	pid := c.docker(time.Minute, "inspect", "--format", "{{.State.Pid}}", c.container(svc))
	var ips []string
	for _, n := range names {
		ip := c.docker(time.Minute, "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", c.container(n))
		ips = append(ips, ip)
	}
	route := func(op, ip string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "nsenter", "-t", pid, "-n", "ip", "route", op, "blackhole", ip+"/32").CombinedOutput()
		if err != nil {
			return fmt.Errorf("nsenter -t %s -n ip route %s blackhole %s/32 (needs root, nsenter and iproute2): %v: %s", pid, op, ip, err, bytes.TrimSpace(out))
		}
		return nil
	}
	for _, ip := range ips {
		if err := route("add", ip); err != nil {
			c.fatalf("%v", err)
		}
	}
	c.t.Logf("%s cut off from %v (%v); the controllers still reach it", svc, names, ips)
	return func() {
		for _, ip := range ips {
			if err := route("del", ip); err != nil {
				c.errorf("%v", err)
			}
		}
		c.t.Logf("%s reaches %v again", svc, names)
	}
}

// brokerState answers the broker's state as the gateway's /v1/cluster says.
func (c *cluster) brokerState(id int32) (string, error) {
	var cl struct {
		Brokers []struct {
			ID    int32  `json:"id"`
			State string `json:"state"`
		} `json:"brokers"`
	}
	if err := c.getJSON("/v1/cluster", &cl); err != nil {
		return "", err
	}
	for _, b := range cl.Brokers {
		if b.ID == id {
			return b.State, nil
		}
	}
	return "", fmt.Errorf("broker %d not in %+v", id, cl.Brokers)
}

// fenceCommands counts, in every controller's log since since, the
// commands that fenced broker id and those that unfenced it (a heartbeat or
// a registration).
func (c *cluster) fenceCommands(id int32, since time.Time) (fences, unfences int) {
	c.t.Helper()
	for i := 1; i <= 3; i++ {
		logs := c.docker(time.Minute, "logs", "--since", since.UTC().Format(time.RFC3339Nano), c.container(fmt.Sprintf("controller-%d", i)))
		for _, line := range strings.Split(logs, "\n") {
			var l struct {
				Msg     string `json:"msg"`
				Command string `json:"command"`
				Broker  *int32 `json:"broker"`
			}
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			switch {
			case l.Msg == "proposed" && strings.HasPrefix(l.Command, fmt.Sprintf("fence broker %d ", id)):
				fences++
			case (l.Msg == "broker unfenced by its heartbeat" || l.Msg == "broker registered") && l.Broker != nil && *l.Broker == id:
				unfences++
			}
		}
	}
	return fences, unfences
}

// partitionFollower cuts a follower off the compose network for cutLength
// while acks=all produces go on, and checks it leaves the ISR, comes back
// by itself — ALIVE and in the ISR within 30 s of the heal, and staying so —
// at the cost of a few fence/unfence commands, with nothing acknowledged lost.
func (c *cluster) partitionFollower(topic string) {
	c.t.Helper()
	p, err := c.describe(topic)
	if err != nil {
		c.fatalf("%v", err)
	}
	var follower int32 = -1
	for _, r := range p.ISR {
		if r != p.Leader {
			follower = r
			break
		}
	}
	if follower < 0 {
		c.fatalf("no follower in isr %v (leader %d)", p.ISR, p.Leader)
	}
	l := c.startLoad(topic, "partition")
	cutAt := time.Now()
	reconnect := c.disconnect(storageService(follower))
	c.t.Logf("follower %d cut off (leader %d)", follower, p.Leader)
	_, isr := c.waitISR(topic, 2, 60*time.Second, func(isr []int32) bool { return !slices.Contains(isr, follower) })
	c.t.Logf("isr %v without %d after %v", isr, follower, time.Since(cutAt).Round(time.Millisecond))
	n := l.count()
	c.eventually(30*time.Second, "acks=all produces with the follower cut off", func() error {
		if got := l.count(); got < n+20 {
			return fmt.Errorf("%d acknowledged since the ISR shrank", got-n)
		}
		return nil
	})
	time.Sleep(time.Until(cutAt.Add(cutLength)))

	reconnect()
	healAt := time.Now()
	c.eventually(30*time.Second, fmt.Sprintf("broker %d ALIVE and in the ISR after the heal", follower), func() error {
		st, err := c.brokerState(follower)
		if err != nil {
			return err
		}
		if d, err := c.describe(topic); err != nil || st != "ALIVE" || !slices.Contains(d.ISR, follower) {
			return fmt.Errorf("state %s, isr %v (%v)", st, d.ISR, err)
		}
		return nil
	})
	c.t.Logf("broker %d ALIVE and in the ISR %v after the heal (cut for %v)", follower, time.Since(healAt).Round(time.Millisecond), healAt.Sub(cutAt).Round(time.Second))
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		st, err := c.brokerState(follower)
		d, err2 := c.describe(topic)
		if err != nil || err2 != nil || st != "ALIVE" || !slices.Contains(d.ISR, follower) {
			c.fatalf("broker %d did not stay back: state %s, isr %v (%v %v)", follower, st, d.ISR, err, err2)
		}
	}
	fences, unfences := c.fenceCommands(follower, cutAt)
	c.t.Logf("the episode cost %d fence and %d unfence/registration commands for broker %d", fences, unfences, follower)
	if fences > 3 || unfences > 3 {
		c.errorf("a %v cut cost %d fences and %d unfences of broker %d; want a few at most", cutLength, fences, unfences, follower)
	}

	acked, failed := l.finish()
	c.t.Logf("%d acks=all produces acknowledged across the cut, %d failed", len(acked), len(failed))
	for _, f := range failed {
		c.errorf("produce failed: %s", f)
	}
	c.checkReadBack(topic, acked)
}

// cutLeaderBound is what the leader-cut phase holds writers to: gossip
// declares the node dead in about 1-2 s, then the election and one round
// trip; with slack for a loaded machine (the goal is 2 s).
const cutLeaderBound = 5 * time.Second

// cutLeaderUnderLoad cuts the partition leader off the network for 20 s —
// or, partial, off from its followers and the gateway only, so that the
// controllers and gossip still see it alive — while acks=all produces run: the longest time without an acknowledgement
// stays within cutLeaderBound, nothing acknowledged is lost, and the node
// is back in the ISR after the heal.
func (c *cluster) cutLeaderUnderLoad(topic string, partial bool) {
	c.t.Helper()
	// The periodic preferred-leader election moves leadership back to the
	// first replica once it is in the ISR again (after an earlier phase):
	// wait for it, so that the broker cut off is the leader.
	var p partitionDesc
	c.eventually(30*time.Second, "the preferred replica to lead", func() (err error) {
		p, err = c.describe(topic)
		if err == nil && (len(p.Replicas) == 0 || p.Leader != p.Replicas[0] || len(p.ISR) != len(p.Replicas)) {
			err = fmt.Errorf("leader %d, replicas %v, isr %v", p.Leader, p.Replicas, p.ISR)
		}
		return err
	})
	prefix := "leadercut"
	if partial {
		prefix = "partialcut"
	}
	l := c.startLoad(topic, prefix)
	c.eventually(30*time.Second, "acks=all produces before the cut", func() error {
		if n := l.count(); n < 50 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	cutAt := time.Now()
	var heal func()
	if partial {
		heal = c.cutFromPeers(storageService(p.Leader), append(followers(p), "gateway"))
	} else {
		heal = c.disconnect(storageService(p.Leader))
	}
	c.eventually(30*time.Second, "a new leader", func() error {
		d, err := c.describe(topic)
		if err == nil && d.Leader == p.Leader {
			err = fmt.Errorf("broker %d still leads (isr %v)", d.Leader, d.ISR)
		}
		return err
	})
	c.t.Logf("new leader after %v", time.Since(cutAt).Round(time.Millisecond))
	if partial {
		// The controllers still hear from the old leader: it is moved, not
		// fenced.
		if st, err := c.brokerState(p.Leader); err != nil || st != "ALIVE" {
			c.errorf("broker %d is %s (%v); a leader the controllers still reach should stay registered", p.Leader, st, err)
		}
	}
	time.Sleep(time.Until(cutAt.Add(20 * time.Second)))
	healAt := time.Now()
	heal()
	c.waitISR(topic, 3, 60*time.Second, nil)
	acked, failed := l.finish()
	gap, prev := time.Duration(0), cutAt
	for _, a := range acked {
		if a.at.Before(cutAt) {
			continue
		}
		gap, prev = max(gap, a.at.Sub(prev)), a.at
		if a.at.After(healAt) {
			break
		}
	}
	c.t.Logf("leader %d cut off (partial: %v) for 20 s: longest gap between acknowledgements %v; %d acknowledged, %d failed", p.Leader, partial, gap.Round(time.Millisecond), len(acked), len(failed))
	if gap > cutLeaderBound {
		c.errorf("no acknowledgement for %v after the leader was cut off (bound %v)", gap.Round(time.Millisecond), cutLeaderBound)
	}
	for _, f := range failed {
		c.errorf("produce failed: %s", f)
	}
	c.checkReadBack(topic, acked)
}

type controllerDesc struct {
	ID     int32 `json:"id"`
	Leader bool  `json:"leader"`
}

// raftLeader answers the controller the gateway's /v1/cluster names leader.
func (c *cluster) raftLeader() (int32, error) {
	var cl struct {
		Controllers []controllerDesc `json:"controllers"`
	}
	if err := c.getJSON("/v1/cluster", &cl); err != nil {
		return 0, err
	}
	for _, ct := range cl.Controllers {
		if ct.Leader {
			return ct.ID, nil
		}
	}
	return 0, fmt.Errorf("no leader among %+v", cl.Controllers)
}

// partitionController cuts the Raft leader off for cutLength, heals, and
// checks it rejoined the quorum by cutting another controller: the quorum
// left (the rejoined one and the third) still creates topics, and gossip
// knows the brokers again (no broker is fenced when the rejoined controller
// is among those that decide).
func (c *cluster) partitionController() {
	c.t.Helper()
	var first int32
	c.eventually(30*time.Second, "a Raft leader", func() (err error) { first, err = c.raftLeader(); return err })
	l := c.startLoad("orders", "ctlcut")
	cutAt := time.Now()
	reconnect := c.disconnect(fmt.Sprintf("controller-%d", first))
	c.eventually(45*time.Second, "a new Raft leader among the other two", func() error {
		id, err := c.raftLeader()
		if err == nil && id == first {
			err = fmt.Errorf("controller %d still named leader", id)
		}
		return err
	})
	c.t.Logf("controller %d cut off; new leader after %v", first, time.Since(cutAt).Round(time.Millisecond))
	time.Sleep(time.Until(cutAt.Add(cutLength)))
	// The reconnect loop may rejoin before `docker network connect` has
	// returned: read the logs from the moment the heal began.
	healAt := time.Now()
	reconnect()
	// Back in gossip: the rejoined controller logs the others' joins.
	c.eventually(30*time.Second, fmt.Sprintf("controller %d sees the cluster in gossip again", first), func() error {
		logs := c.docker(time.Minute, "logs", "--since", healAt.UTC().Format(time.RFC3339Nano), c.container(fmt.Sprintf("controller-%d", first)))
		seen := map[string]bool{}
		for _, line := range strings.Split(logs, "\n") {
			var e struct {
				Msg, Event, Member string
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "gossip" && e.Event == "join" {
				seen[e.Member] = true
			}
		}
		if len(seen) < 5 {
			return fmt.Errorf("joins seen since the heal: %v", seen)
		}
		return nil
	})
	c.t.Logf("controller %d back in gossip %v after the heal", first, time.Since(healAt).Round(time.Millisecond))

	// Back in Raft: cut the current leader (not the rejoined one); the
	// quorum that remains needs the rejoined controller.
	var second int32
	c.eventually(30*time.Second, "a Raft leader", func() (err error) { second, err = c.raftLeader(); return err })
	if second == first {
		second = first%3 + 1
	}
	reconnect2 := c.disconnect(fmt.Sprintf("controller-%d", second))
	c.createTopic("after-controller-cut", 3, 2)
	c.waitISR("after-controller-cut", 3, 60*time.Second, nil)
	c.t.Logf("with controller %d cut off, the quorum with rejoined controller %d created a topic", second, first)
	for id := int32(1); id <= 3; id++ {
		if st, err := c.brokerState(id); err != nil || st != "ALIVE" {
			c.errorf("broker %d is %s (%v) with the rejoined controller in the quorum", id, st, err)
		}
	}
	reconnect2()
	acked, failed := l.finish()
	c.t.Logf("%d acks=all produces acknowledged across the controller cuts, %d failed", len(acked), len(failed))
	c.checkReadBack("orders", acked)
}

// ---- Jaeger ----

type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		ProcessID     string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
		Tags        []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"processes"`
}

// who is "service/instance" of a span's process.
func (tr *jaegerTrace) who(processID string) string {
	p := tr.Processes[processID]
	inst := ""
	for _, tag := range p.Tags {
		if tag.Key == "service.instance.id" {
			inst = fmt.Sprint(tag.Value)
		}
	}
	return p.ServiceName + "/" + inst
}

// checkTrace produces one record to a fresh topic and finds its trace in
// Jaeger: spans from the gateway, storage.append from the leader and
// replica.append from both followers.
func (c *cluster) checkTrace() {
	c.t.Helper()
	topic := fmt.Sprintf("traced-%d", time.Now().UnixNano())
	c.createTopic(topic, 3, 2)
	leader, isr := c.waitISR(topic, 3, 60*time.Second, nil)
	if _, err := c.produce(topic, "follow me"); err != nil {
		c.fatalf("%v", err)
	}
	want := map[string]string{fmt.Sprintf("skein-storage/%d", leader): "storage.append"}
	for _, r := range isr {
		if r != leader {
			want[fmt.Sprintf("skein-storage/%d", r)] = "replica.append"
		}
	}
	q := url.Values{"service": {"skein-storage"}, "operation": {"storage.append"}, "tags": {`{"topic":"` + topic + `"}`},
		"lookback": {"1h"}, "limit": {"20"}}
	var found *jaegerTrace
	c.eventually(90*time.Second, "the produce's trace in Jaeger", func() error {
		var res struct {
			Data []jaegerTrace `json:"data"`
		}
		if err := getJSON(c.http, c.jaeger+"/api/traces?"+q.Encode(), &res); err != nil {
			return err
		}
		if len(res.Data) == 0 {
			return fmt.Errorf("no trace with a storage.append span for topic %s yet", topic)
		}
		var missing []string
		for i := range res.Data {
			tr := &res.Data[i]
			seen := map[string]bool{}
			gateway := false
			for _, s := range tr.Spans {
				w := tr.who(s.ProcessID)
				seen[w+" "+s.OperationName] = true
				gateway = gateway || strings.HasPrefix(w, "skein-gateway/")
			}
			missing = missing[:0]
			if !gateway {
				missing = append(missing, "a skein-gateway span")
			}
			for w, op := range want {
				if !seen[w+" "+op] {
					missing = append(missing, w+" "+op)
				}
			}
			if len(missing) == 0 {
				found = tr
				return nil
			}
		}
		return fmt.Errorf("trace(s) lack %v", missing)
	})
	// Jaeger finds the same trace when asked for the gateway's traces.
	gq := url.Values{"service": {"skein-gateway"}, "lookback": {"1h"}, "limit": {"500"}}
	c.eventually(30*time.Second, "the trace among skein-gateway's", func() error {
		var res struct {
			Data []jaegerTrace `json:"data"`
		}
		if err := getJSON(c.http, c.jaeger+"/api/traces?"+gq.Encode(), &res); err != nil {
			return err
		}
		for _, tr := range res.Data {
			if tr.TraceID == found.TraceID {
				return nil
			}
		}
		return fmt.Errorf("trace %s is not among the %d answered for service=skein-gateway", found.TraceID, len(res.Data))
	})
	var lines []string
	for _, s := range found.Spans {
		lines = append(lines, found.who(s.ProcessID)+" "+s.OperationName)
	}
	slices.Sort(lines)
	c.t.Logf("trace %s (leader %d, isr %v): %d spans:\n  %s", found.TraceID, leader, isr, len(found.Spans), strings.Join(lines, "\n  "))
}

func getJSON(hc *http.Client, u string, out any) error {
	resp, err := hc.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}
