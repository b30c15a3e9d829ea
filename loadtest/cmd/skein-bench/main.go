// Command skein-bench is Skein's load generator, in the spirit of Kafka's
// kafka-producer-perf-test and kafka-consumer-perf-test:
//
//	skein-bench produce [flags]   produce load; records/s, MiB/s, latency percentiles
//	skein-bench consume [flags]   fetch throughput and end-to-end latency
//	                              (--group G --members N: as a consumer group)
//	skein-bench disk [flags]      raw limit: sequential writes with an fsync every N bytes
//	skein-bench tcp [flags]       raw limit: loopback TCP stream throughput and round trips
//	skein-bench stalls [flags]    how late a sleeper wakes, and how busy the CPUs are
//	                              (run it under chrt -f beside a workload)
//
// Produce goes through the gateway's gRPC ProduceStream (grpc-stream, the
// default), its unary gRPC Produce (grpc) or REST (rest), or straight to the
// storage nodes through libs/client (direct). A progress line goes to stderr
// every second while it runs; the summary goes to stdout, as JSON with
// --json, and includes skein-bench's own CPU time over the measured run. Every produced value starts with its send time, which consume
// turns into end-to-end latency. See docs/BENCHMARKS.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"skein/loadtest/internal/bench"
)

const usage = `usage: skein-bench produce|consume|disk|tcp|stalls [flags]  (skein-bench CMD -h for flags)`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "produce":
		err = produce(ctx, os.Args[2:])
	case "consume":
		err = consume(ctx, os.Args[2:])
	case "disk":
		err = disk(os.Args[2:])
	case "tcp":
		err = tcp(os.Args[2:])
	case "stalls":
		err = stalls(ctx, os.Args[2:])
	case "-h", "-help", "--help", "help":
		fmt.Println(usage)
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "skein-bench:", err)
		os.Exit(1)
	}
}

type kvFlag map[string]string

func (k kvFlag) String() string { return fmt.Sprint(map[string]string(k)) }
func (k kvFlag) Set(s string) error {
	key, val, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	k[key] = val
	return nil
}

// sizeFlag reads 1048576, 1024KiB, 1MiB, 2GiB.
type sizeFlag int64

func (s *sizeFlag) String() string { return fmt.Sprint(int64(*s)) }
func (s *sizeFlag) Set(v string) error {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.m
			break
		}
	}
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil || n < 0 {
		return fmt.Errorf("bad size %q", v)
	}
	*s = sizeFlag(n * mult)
	return nil
}

type common struct {
	transport   *string
	gateway     *string
	rest        *string
	controllers *string
	clusterJSON *string
	topic       *string
	json        *bool
	progress    *time.Duration
	cpuProfile  *string
	memProfile  *string
}

func commonFlags(fs *flag.FlagSet, defTransport string) common {
	return common{
		transport:   fs.String("transport", defTransport, "grpc-stream (gateway ProduceStream), grpc (gateway unary), rest (gateway REST), direct (storage nodes through libs/client), txn (produce only: direct, a transactional producer per worker) or tail (consume only: the gateway's server-streaming Tail, a stream per partition)"),
		gateway:     fs.String("gateway", envOr("SKEIN_GATEWAY", "127.0.0.1:9090"), "gateway gRPC address (env SKEIN_GATEWAY)"),
		rest:        fs.String("rest", envOr("SKEIN_REST", "http://127.0.0.1:8080"), "gateway REST base URL (env SKEIN_REST)"),
		controllers: fs.String("controllers", os.Getenv("SKEIN_CONTROLLERS"), "controller gRPC addresses, for --transport direct (env SKEIN_CONTROLLERS)"),
		clusterJSON: fs.String("cluster-json", "skein-dev/cluster.json", "with --transport direct and no --controllers: the controllers `skein dev` wrote there"),
		topic:       fs.String("topic", "skein-bench", "topic"),
		json:        fs.Bool("json", false, "print the summary as JSON on stdout"),
		progress:    fs.Duration("progress", time.Second, "progress line interval on stderr (0: none)"),
		cpuProfile:  fs.String("cpuprofile", "", "write skein-bench's own CPU profile over the whole run to this file (go tool pprof reads it)"),
		memProfile:  fs.String("memprofile", "", "write skein-bench's own allocation profile, taken at the end of the run, to this file"),
	}
}

// profile starts the CPU profile --cpuprofile asks for; the function it
// returns stops it and writes the allocation profile --memprofile asks for.
func (c common) profile() (stop func() error, err error) {
	var cpu *os.File
	if *c.cpuProfile != "" {
		if cpu, err = os.Create(*c.cpuProfile); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	return func() error {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
		}
		if *c.memProfile == "" {
			return nil
		}
		f, err := os.Create(*c.memProfile)
		if err != nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			f.Close()
			return fmt.Errorf("--memprofile: %w", err)
		}
		return f.Close()
	}, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (c common) endpoints() (bench.Endpoints, error) {
	var ctrls []string
	for _, a := range strings.Split(*c.controllers, ",") {
		if a = strings.TrimSpace(a); a != "" {
			ctrls = append(ctrls, a)
		}
	}
	if len(ctrls) == 0 && (*c.transport == bench.Direct || *c.transport == bench.Txn) {
		b, err := os.ReadFile(*c.clusterJSON)
		if err != nil {
			return bench.Endpoints{}, fmt.Errorf("--transport direct needs --controllers, or a skein dev cluster.json: %w", err)
		}
		var f struct {
			Processes []struct {
				Role     string `json:"role"`
				GRPCAddr string `json:"grpc_addr"`
			} `json:"processes"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return bench.Endpoints{}, fmt.Errorf("%s: %w", *c.clusterJSON, err)
		}
		for _, p := range f.Processes {
			if p.Role == "controller" {
				ctrls = append(ctrls, p.GRPCAddr)
			}
		}
	}
	return bench.Endpoints{Gateway: *c.gateway, REST: *c.rest, Controllers: ctrls}, nil
}

func emit(asJSON bool, v fmt.Stringer) error {
	if !asJSON {
		fmt.Println(v.String())
		return nil
	}
	fmt.Fprintln(os.Stderr, v.String())
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func produce(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("skein-bench produce", flag.ExitOnError)
	c := commonFlags(fs, bench.GRPCStream)
	configs := kvFlag{}
	fs.Var(configs, "config", "topic config KEY=VALUE for a topic created here (repeatable), e.g. min.insync.replicas=2, flush.messages=1")
	create := fs.Bool("create", true, "create the topic when it does not exist")
	partitions := fs.Int("partitions", 1, "partitions of a created topic; each request names one, round-robin over the topic's partitions, unless --keyless")
	keyless := fs.Bool("keyless", false, "send records with neither key nor partition: the producer (the gateway's, or libs/client's with --transport direct or txn) places them, one partition per batch, as Kafka's default partitioner does for keyless records")
	rf := fs.Int("replication-factor", 3, "replication factor of a created topic (0: the cluster's default)")
	size := fs.Int("record-size", 1024, "value bytes per record")
	num := fs.Int64("num-records", 0, "records to produce (0: run for --duration)")
	dur := fs.Duration("duration", 0, "how long to produce (default 10s when --num-records is 0)")
	warmup := fs.Duration("warmup", 0, "produce this long first, at the same rate, without counting it")
	rate := fs.Float64("throughput", -1, "records/s over all workers (-1: as fast as acknowledged)")
	acks := fs.Int("acks", -1, "0, 1 or -1 (all)")
	batch := fs.Int("batch", 1, "records per request")
	conc := fs.Int("concurrency", 1, "workers: a ProduceStream or connection each")
	inflight := fs.Int("in-flight", 32, "unanswered requests per stream (grpc-stream) or in all (direct)")
	producerBatch := fs.Int("producer-batch-size", 0, "with --transport direct: libs/client's batch.size in bytes (0: its default, 256 KiB; Kafka's is 16 KiB)")
	txnRecords := fs.Int("txn-records", 100, "with --transport txn: records per transaction")
	compression := fs.String("compression", "", "codec of the batches for a topic whose compression.type is producer: none, gzip, snappy, lz4 or zstd (default: the gateway's --compression; none for direct and txn)")
	_ = fs.Parse(args)
	ep, err := c.endpoints()
	if err != nil {
		return err
	}
	stopProfile, err := c.profile()
	if err != nil {
		return err
	}
	sum, err := bench.Produce(ctx, bench.ProduceConfig{
		Transport: *c.transport, Endpoints: ep,
		Topic:      bench.Topic{Name: *c.topic, Create: *create, Partitions: *partitions, ReplicationFactor: *rf, Configs: configs},
		RecordSize: *size, NumRecords: *num, Duration: *dur, Rate: *rate, Acks: *acks, Batch: *batch,
		Concurrency: *conc, InFlight: *inflight, Keyless: *keyless, ProducerBatchSize: *producerBatch, TxnRecords: *txnRecords, Compression: *compression, Warmup: *warmup, Progress: *c.progress, Log: os.Stderr,
	})
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	return emit(*c.json, sum)
}

func consume(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("skein-bench consume", flag.ExitOnError)
	c := commonFlags(fs, bench.GRPC)
	from := fs.String("from", "earliest", "earliest or latest")
	num := fs.Int64("num-records", 0, "stop after this many records (0: until --duration or idle)")
	dur := fs.Duration("duration", 0, "stop after this long (0: until --num-records or idle)")
	idle := fs.Duration("idle-timeout", 5*time.Second, "stop when no partition has had a new record for this long")
	maxRecs := fs.Int("max-records", 2000, "records per fetch")
	maxWait := fs.Duration("max-wait", 500*time.Millisecond, "long-poll per fetch")
	minBytes := fs.Int("min-bytes", 0, "bytes of records a fetch waits for, up to --max-wait (fetch.min.bytes; 0: answer as soon as there is any; with --group, over all of a member's partitions; not for --transport tail)")
	group := fs.String("group", "", "consume as this consumer group through the gateway's GroupService (gRPC), with --members members")
	members := fs.Int("members", 1, "with --group: members, each on its own connection")
	commitEvery := fs.Duration("commit-interval", time.Second, "with --group: how often each member commits its positions")
	_ = fs.Parse(args)
	if *from != "earliest" && *from != "latest" {
		return fmt.Errorf("--from %q: want earliest or latest", *from)
	}
	if *minBytes < 0 || *minBytes > math.MaxInt32 {
		return fmt.Errorf("--min-bytes %d: want 0 or more bytes", *minBytes)
	}
	if *minBytes > 0 && *group == "" && *c.transport == bench.Tail {
		return fmt.Errorf("--min-bytes: for fetches, not with --transport tail")
	}
	ep, err := c.endpoints()
	if err != nil {
		return err
	}
	stopProfile, err := c.profile()
	if err != nil {
		return err
	}
	defer func() {
		if perr := stopProfile(); err == nil {
			err = perr
		}
	}()
	if *group != "" {
		sum, err := bench.GroupConsume(ctx, bench.GroupConsumeConfig{
			Endpoints: ep, Topic: *c.topic, Group: *group, Members: *members, FromLatest: *from == "latest",
			NumRecords: *num, Duration: *dur, IdleTimeout: *idle, MaxRecords: *maxRecs, MaxWait: *maxWait,
			MinBytes: int32(*minBytes), CommitInterval: *commitEvery, Progress: *c.progress, Log: os.Stderr,
		})
		if err != nil {
			return err
		}
		return emit(*c.json, sum)
	}
	sum, err := bench.Consume(ctx, bench.ConsumeConfig{
		Transport: *c.transport, Endpoints: ep, Topic: *c.topic, FromLatest: *from == "latest",
		NumRecords: *num, Duration: *dur, IdleTimeout: *idle, MaxRecords: *maxRecs, MaxWait: *maxWait, MinBytes: int32(*minBytes),
		Progress: *c.progress, Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	return emit(*c.json, sum)
}

func disk(args []string) error {
	fs := flag.NewFlagSet("skein-bench disk", flag.ExitOnError)
	dir := fs.String("dir", ".", "directory to write in (put it on the disk the cluster's data is on)")
	size, block, every := sizeFlag(512<<20), sizeFlag(64<<10), sizeFlag(1<<20)
	fs.Var(&size, "size", "bytes to write (e.g. 512MiB)")
	fs.Var(&block, "block", "bytes per write")
	fs.Var(&every, "fsync-every", "fsync after this many bytes")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	_ = fs.Parse(args)
	r, err := bench.DiskWrite(*dir, int64(size), int64(block), int64(every))
	if err != nil {
		return err
	}
	return emit(*asJSON, r)
}

func tcp(args []string) error {
	fs := flag.NewFlagSet("skein-bench tcp", flag.ExitOnError)
	size, block := sizeFlag(2<<30), sizeFlag(64<<10)
	fs.Var(&size, "size", "bytes to stream")
	fs.Var(&block, "block", "bytes per write")
	rtts := fs.Int("round-trips", 20000, "ping-pong round trips (0: none)")
	rttSize := fs.Int("rtt-size", 1024, "bytes per ping")
	asJSON := fs.Bool("json", false, "print the results as JSON on stdout")
	_ = fs.Parse(args)
	s, err := bench.TCPStream(int64(size), int64(block))
	if err != nil {
		return err
	}
	if err := emit(*asJSON, s); err != nil {
		return err
	}
	if *rtts <= 0 {
		return nil
	}
	r, err := bench.TCPRoundTrip(*rtts, *rttSize)
	if err != nil {
		return err
	}
	return emit(*asJSON, r)
}

func stalls(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("skein-bench stalls", flag.ExitOnError)
	interval := fs.Duration("interval", 2*time.Millisecond, "how long each sleep is")
	duration := fs.Duration("duration", 0, "how long to run (0: until SIGTERM or Ctrl-C)")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	_ = fs.Parse(args)
	if *interval <= 0 || *duration < 0 {
		return fmt.Errorf("--interval %v --duration %v: want a positive interval and a duration of 0 or more", *interval, *duration)
	}
	r, err := bench.Stalls(ctx, *interval, *duration)
	if err != nil {
		return err
	}
	return emit(*asJSON, r)
}
