package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"skein/libs/cliflag"
	"skein/libs/errs"
	"skein/libs/rpcerr"
	"skein/libs/tlsconf"
)

// DefaultGateway is the gateway's default gRPC address.
const DefaultGateway = "127.0.0.1:9090"

// IO is where a command reads and writes.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct {
	msg string
	// flagged: the flag package has printed the command's own usage
	// already, so the whole command line's is not printed after it.
	flagged bool
}

// subcommandHelp answers whether sub asks for help ("skein topic --help"),
// after printing the usage lines of cmd's subcommands.
func subcommandHelp(w io.Writer, cmd, sub string) bool {
	switch sub {
	case "-h", "-help", "--help", "help":
	default:
		return false
	}
	fmt.Fprintln(w, "Usage:")
	for _, l := range strings.Split(usage, "\n") {
		if strings.HasPrefix(l, "  skein "+cmd+" ") {
			fmt.Fprintln(w, l)
		}
	}
	return true
}

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

const usage = `skein is the command line of Skein, a replicated commit log.

Usage:
  skein topic create NAME [--partitions N] [--replication-factor N] [--config KEY=VALUE]...
  skein topic list [--internal]
  skein topic describe NAME
  skein topic alter NAME [--partitions N] [--config KEY=VALUE]...
  skein topic delete NAME
  skein topic delete-records NAME (--before PARTITION=OFFSET... | --all)   (OFFSET -1: the high watermark)
  skein topic elect-leaders NAME [--type preferred|unclean]   (as kafka-leader-election.sh, for every partition)
  skein produce TOPIC [--key-separator SEP] [--acks 0|1|all] [--partition N]   (records: stdin lines)
                [--transactional-id ID]   (all lines in one transaction, committed at the end:
                                           any failure or Ctrl-C writes none of them)
                [--compression none|gzip|snappy|lz4|zstd] [--header KEY=VALUE]...
  skein consume TOPIC [--from earliest|latest|OFFSET] [--follow] [--partition N] [--max N]
                [--print-key] [--key-separator SEP] [--read-committed]
                [--print-timestamp] [--print-partition] [--print-offset] [--print-headers]
  skein consume TOPIC --group G [--from earliest|latest|none] [--max N] [--idle DURATION]
                [--session-timeout DURATION] [--instance-id ID] [--assignor range|uniform]
                [--print-key] [--key-separator SEP] [--read-committed]
                [--print-timestamp] [--print-partition] [--print-offset] [--print-headers]
  skein group list [--state empty,reconciling,stable]
  skein group describe GROUP
  skein group reset-offsets GROUP (--topic T[:P,P...] | --all-topics)
                (--to-earliest | --to-latest | --to-offset N | --to-timestamp MS | --to-datetime TIME
                 | --by-duration DURATION | --shift-by N)
                [--execute | --dry-run]   (without --execute, only prints the new offsets, as Kafka's tool)
  skein group delete GROUP
  skein group delete-offsets GROUP --topic T [--partition N]...   (without --partition, every partition of T)
                (as kafka-consumer-groups --delete-offsets: a topic a member of the group reads keeps its offsets)
  skein group dlq GROUP --topic T [--dlq-topic D]          (what the group dead-lettered from T, with the reasons)
  skein group dlq-replay GROUP --topic T [--dlq-topic D]   (produce those records back to T)
                (D: the dead-letter topic to read; default the group's dlq.topic, else T.dlq)
  skein txn list [--state S,...]   (as kafka-transactions.sh list; S: ONGOING, PREPARE_COMMIT, ... or Kafka's Ongoing)
  skein txn describe ID        (state, producer, the open transaction's start and partitions)
  skein txn describe-producers --topic T --partition P   (the partition leader's producers; an open
                transaction's start offset holds the partition's last stable offset)
  skein cluster
  skein acl add --principal User:NAME --operation OP[,OP]... (--topic T | --group G | --transactional-id ID | --cluster)
                [--pattern literal|prefixed] [--permission allow|deny]
  skein acl list [--principal P] [--topic T | --group G | --transactional-id ID | --cluster] [--operation OP] ...
  skein acl remove (the filter of list, but a named resource's literal bindings unless --pattern; at least one flag)
  skein dev [--data-dir DIR] [--storage-nodes N] [--bin-dir DIR]
            [--gateway-http-addr 127.0.0.1:8080] [--gateway-grpc-addr 127.0.0.1:9090] [--secure]
  skein certs --dir DIR --name storage-1,gateway,client [--hosts storage-1,127.0.0.1] [--gossip-key]

Every command but dev and certs talks to a gateway's gRPC API: --gateway ADDR (env
SKEIN_GATEWAY, default 127.0.0.1:9090), before the command or after its
subcommand (skein --gateway ADDR topic list, skein topic list --gateway ADDR),
as --json, --tls-ca, --tls-cert, --tls-key and --token may be. Flags have environment twins
SKEIN_<FLAG>, e.g. SKEIN_KEY_SEPARATOR (an empty one counts as unset). Add
--json for the API's JSON output.

produce sends each stdin line as a record (as bytes when it is not UTF-8).
A line it cannot make a record of (no key separator, say) stops the input
there: the lines before it are written. A record the gateway refuses (too
large for the topic, say) is counted and the others still go; the error at
the end says how many were not written. Ctrl-C stops reading, waits for the
answers of what was sent, and exits with status 130, as an interrupted
consume does.
`

// connectionFlags are the flags every command that talks to a gateway
// takes, with whether each takes a value.
var connectionFlags = map[string]bool{"gateway": true, "tls-ca": true, "tls-cert": true, "tls-key": true, "token": true, "json": false}

// hoistConnectionFlags moves the connection flags given before the command
// ("skein --gateway ADDR topic list", as other tools take them) after it,
// where the command's own flags are parsed. Anything else before the
// command is left for the command name check to refuse.
func hoistConnectionFlags(args []string) []string {
	var lead []string
	i := 0
	for i < len(args) {
		name, hasValue := strings.CutPrefix(args[i], "--")
		if !hasValue {
			if name, hasValue = strings.CutPrefix(args[i], "-"); !hasValue || name == "" {
				break
			}
		}
		name, _, inline := strings.Cut(name, "=")
		takesValue, ok := connectionFlags[name]
		if !ok {
			break
		}
		n := 1
		if takesValue && !inline && i+1 < len(args) {
			n = 2
		}
		lead = append(lead, args[i:i+n]...)
		i += n
	}
	if len(lead) == 0 {
		return args
	}
	return append(slices.Clone(args[i:]), lead...)
}

// Main runs the command line and answers the exit status.
func Main(args []string, io IO) int {
	args = hoistConnectionFlags(args)
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(io.Out, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "topic":
		err = topicCmd(ctx, args[1:], io)
	case "produce":
		err = produceCmd(ctx, args[1:], io)
	case "consume":
		err = consumeCmd(ctx, args[1:], io)
	case "group":
		err = groupCmd(ctx, args[1:], io)
	case "txn":
		err = txnCmd(ctx, args[1:], io)
	case "cluster":
		err = clusterCmd(ctx, args[1:], io)
	case "acl":
		err = aclCmd(ctx, args[1:], io)
	case "dev":
		err = devCmd(ctx, args[1:], io)
	case "certs":
		err = certsCmd(ctx, args[1:], io)
	default:
		if strings.HasPrefix(args[0], "-") {
			err = usagef("unknown flag %q before the command", args[0])
		} else {
			err = usagef("unknown command %q", args[0])
		}
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled):
		// Interrupted (Ctrl-C or SIGTERM): no error of the gateway's, and
		// the status a shell gives a command SIGINT ended.
		return 130
	case errors.As(err, &ue) && ue.flagged:
		fmt.Fprintf(io.Err, "skein: %v\n", err)
		return 2
	case errors.As(err, &ue):
		if u := commandUsage(args[0]); u != "" {
			// The command's own lines, not the whole command line's.
			fmt.Fprintf(io.Err, "skein: %v\n\nUsage:\n%s\n(skein --help for every command)\n", err, u)
		} else {
			fmt.Fprintf(io.Err, "skein: %v\n\n%s", err, usage)
		}
		return 2
	}
	fmt.Fprintln(io.Err, "skein:", describeErr(err))
	return 1
}

// commandUsage answers the usage lines of command cmd (each "  skein cmd"
// line and the more indented lines that continue it), "" for a command
// the usage does not list.
func commandUsage(cmd string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  skein "):
			in = strings.HasPrefix(line, "  skein "+cmd+" ") || line == "  skein "+cmd
		case !strings.HasPrefix(line, "   "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// int32Flag answers a flag's value as an int32, or a usage error naming
// the flag when it does not fit one (a plain conversion would make
// 4294967297 a 1).
func int32Flag(name string, v int) (int32, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, usagef("--%s %d is out of range: at most %d", name, v, math.MaxInt32)
	}
	return int32(v), nil
}

// describeErr renders a gateway refusal as "ERROR_CODE: message".
func describeErr(err error) string {
	if st, ok := status.FromError(err); ok {
		d := rpcerr.FromStatus(err)
		msg := errs.Of(d).Name + ": " + errs.Message(d)
		// Only this command's own dial: a gateway relays its own failures
		// to reach a controller or storage node as Unavailable too, and
		// the gateway is then plainly there.
		if st.Code() == codes.Unavailable && strings.Contains(st.Message(), "connection refused") && strings.Contains(st.Message(), "Error while dialing") {
			msg += " (is a gateway listening there? --gateway or SKEIN_GATEWAY names its gRPC address)"
		}
		preface := st.Code() == codes.Unavailable && strings.Contains(st.Message(), "error reading server preface") && !strings.Contains(st.Message(), certRefusedHint)
		switch {
		case st.Code() == codes.Unavailable && strings.Contains(st.Message(), "looked like an HTTP/1.1 header"):
			msg += " (that address answers HTTP/1.1: it looks like the gateway's REST port; --gateway or SKEIN_GATEWAY names its gRPC address, which skein dev puts on port 9090 unless told --gateway-grpc-addr)"
		case preface && strings.Contains(st.Message(), "use of closed network connection"):
			// This side gave up: the address took the connection and
			// said nothing.
			msg += " (the address took the connection but said nothing before this command gave up: a gateway that is stopped or overloaded, or something other than a gateway listening there)"
		case preface:
			msg += " (the gateway closed the connection before speaking gRPC: if it takes TLS, pass --tls-ca with the cluster's CA)"
		case st.Code() == codes.Unimplemented && strings.Contains(st.Message(), "unknown service skein.v1."):
			msg += " (that address serves gRPC but not the gateway's API: a storage node, controller or coordinator? --gateway or SKEIN_GATEWAY names the gateway's gRPC address)"
		}
		return msg
	}
	return err.Error()
}

// flags is a command's flag set with the common flags and env twins.
type flags struct {
	*flag.FlagSet
	// typed: the flags given on the command line, not by their
	// environment twins (set by parse).
	typed                  map[string]bool
	gateway                *string
	json                   *bool
	tlsCA, tlsCert, tlsKey *string
	token                  *string
}

func newFlags(name string, io IO, withGateway bool) *flags {
	fs := flag.NewFlagSet("skein "+name, flag.ContinueOnError)
	fs.SetOutput(io.Err)
	f := &flags{FlagSet: fs}
	if withGateway {
		f.gateway = fs.String("gateway", DefaultGateway, "the gateway's gRPC address (env SKEIN_GATEWAY)")
		f.json = fs.Bool("json", false, "print the API's JSON answer")
		f.tlsCA = fs.String("tls-ca", "", "CA certificate (PEM) to check a TLS gateway with; set, skein talks TLS (env SKEIN_TLS_CA; skein dev --secure prints it)")
		f.tlsCert = fs.String("tls-cert", "", "client certificate (PEM) to present to the gateway (env SKEIN_TLS_CERT)")
		f.tlsKey = fs.String("tls-key", "", "key of --tls-cert (env SKEIN_TLS_KEY)")
		f.token = fs.String("token", "", "bearer token to authenticate to the gateway with (a token file's token or a JWT; needs --tls-ca, env SKEIN_TOKEN; skein dev --secure prints a dev token)")
	}
	return f
}

// parseSub parses a subcommand's args and checks its positional arguments:
// none for list, exactly one (the topic or group name) for the others.
func (f *flags) parseSub(cmd, sub string, args []string) ([]string, error) {
	pos, err := f.parse(args)
	if err != nil {
		return nil, err
	}
	want := 1
	if sub == "list" {
		want = 0
	}
	if len(pos) != want {
		return nil, usagef("%s %s takes %d argument(s), got %q", cmd, sub, want, pos)
	}
	return pos, nil
}

// parse parses args, interleaving flags and positional arguments as users
// type them ("topic create t --partitions 3"), then fills unset flags from
// SKEIN_<FLAG> variables, and answers the positional arguments.
func (f *flags) parse(args []string) ([]string, error) {
	if name := f.repeated(args); name != "" {
		// The flag package keeps the last: "--topic a --topic b" would act
		// on b alone, and say nothing of a.
		return nil, usagef("--%s is given more than once: it takes one value", name)
	}
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{msg: err.Error(), flagged: true}
		}
		args = f.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	f.typed = map[string]bool{}
	f.Visit(func(fl *flag.Flag) { f.typed[fl.Name] = true })
	if err := cliflag.FillFromEnv(f.FlagSet, os.Getenv); err != nil {
		return pos, usagef("%v", err)
	}
	return pos, nil
}

// repeatable marks a flag's value that takes the flag more than once
// (--config KEY=VALUE).
type repeatable interface{ repeatable() }

// repeated answers the first flag of args given twice that takes one value,
// "" when none is. It reads args as parse does: a flag that takes a value
// and has no "=VALUE" takes the next argument.
func (f *flags) repeated(args []string) string {
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		fl := f.Lookup(name)
		if fl == nil {
			continue
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); !(ok && b.IsBoolFlag()) && !hasValue {
			i++ // its value
		}
		if _, ok := fl.Value.(repeatable); ok {
			continue
		}
		if seen[name] {
			return name
		}
		seen[name] = true
	}
	return ""
}

// dial connects to the gateway.
func (f *flags) dial() (*grpc.ClientConn, error) {
	addr := strings.TrimPrefix(strings.TrimPrefix(*f.gateway, "grpc://"), "dns:///")
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return nil, usagef("--gateway %s: skein talks to the gateway's gRPC address (host:port, default %s), not its REST URL", *f.gateway, DefaultGateway)
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return nil, usagef("--gateway %s: want the gateway's gRPC address as host:port (default %s)", *f.gateway, DefaultGateway)
	}
	creds := insecure.NewCredentials()
	if *f.tlsCA != "" {
		tc, err := tlsconf.ClientConfigFiles(*f.tlsCA, *f.tlsCert, *f.tlsKey)
		if err != nil {
			return nil, usagef("%v", err)
		}
		creds = credentials.NewTLS(tc)
	} else if *f.tlsCert != "" || *f.tlsKey != "" {
		return nil, usagef("--tls-cert and --tls-key need --tls-ca")
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20))}
	if *f.token != "" {
		if *f.tlsCA == "" {
			return nil, usagef("--token needs --tls-ca: a bearer token is never sent in plaintext")
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(*f.token)))
	}
	if *f.tlsCert != "" {
		cr := &certRefusal{}
		opts = append(opts, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
			return cr.explain(invoker(ctx, method, req, reply, cc, o...))
		}), grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, o...)
			if err != nil {
				return nil, cr.explain(err)
			}
			return &certRefusalStream{ClientStream: s, cr: cr}, nil
		}))
	}
	return grpc.NewClient(addr, opts...)
}

// certRefusedHint marks a failure certRefusal explained.
const certRefusedHint = "the gateway closed the connection during or right after the TLS handshake: it refuses a client certificate its CA did not issue; --tls-cert must be one the cluster's CA issued"

// certRefusal explains a connection a TLS gateway dropped before it ever
// answered a call made with a client certificate. Under TLS 1.3 the client
// finishes its side of the handshake before the server checks the
// certificate, so the refusal reaches gRPC as whatever the next read or
// write met: the server's alert, a reset, a broken pipe, a preface that
// never came. Once the gateway has answered, such failures are something
// else (a gateway restarting mid-call) and are left as they are.
type certRefusal struct{ answered atomic.Bool }

func (c *certRefusal) explain(err error) error {
	st, ok := status.FromError(err)
	if err == nil || (ok && (st.Code() != codes.Unavailable || len(st.Details()) > 0)) {
		c.answered.Store(true) // the gateway spoke
		return err
	}
	if !ok || c.answered.Load() {
		return err
	}
	m := st.Message()
	for _, sign := range []string{"tls: unknown certificate authority", "tls: bad certificate", "broken pipe", "connection reset by peer", "error reading server preface"} {
		if strings.Contains(m, sign) {
			p := st.Proto()
			p.Message = m + " (" + certRefusedHint + ")"
			return status.FromProto(p).Err()
		}
	}
	return err
}

// certRefusalStream explains a stream's failures as certRefusal does.
type certRefusalStream struct {
	grpc.ClientStream
	cr *certRefusal
}

func (s *certRefusalStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if errors.Is(err, io.EOF) {
		return err // the status comes from RecvMsg
	}
	return s.cr.explain(err)
}

func (s *certRefusalStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if errors.Is(err, io.EOF) {
		s.cr.answered.Store(true)
		return err
	}
	return s.cr.explain(err)
}

// bearer sends a token as every call's "authorization: Bearer" metadata,
// over TLS only.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// printJSON prints m as the REST API would.
// printJSONLine writes m as the API's JSON on one line (JSON Lines), for
// commands that print a stream of answers.
func printJSONLine(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	var line bytes.Buffer
	if err := json.Compact(&line, b); err != nil {
		return err
	}
	line.WriteByte('\n')
	_, err = w.Write(line.Bytes())
	return err
}

func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	// protojson varies its whitespace on purpose; print it stable.
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, out.String())
	return err
}

// timeout bounds a single unary call.
func timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}
