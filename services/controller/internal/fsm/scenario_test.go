package fsm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// The scenarios in testdata/*.txt drive the machine one command per line, in
// the spirit of etcd's raft interaction tests:
//
//	register-broker 1 rack=a [incarnation=x] [dir=D]  (D: its data directory's id; dir= sends none)
//	fence-broker 2 [epoch=N]          unfence-broker 2 [epoch=N]
//	controlled-shutdown 1 [epoch=N]
//	create-topic t partitions=3 [rf=3] [validate-only] [k=v configs...]
//	delete-topic t                    create-partitions t count=5
//	alter-configs t k=v ...  (k= removes)
//	alter-partition t/0 broker=1 isr=1,2 [leader-epoch=N] [partition-epoch=N] [epoch=N]
//	                [member-epochs=0,cur,N]  (each member's broker epoch; cur: its current one)
//	elect-leaders preferred|unclean [t/0 ...] [t]
//	allocate-producer-ids [node=1] [count=N] [epoch=N]
//	create-internal-topics offsets=N txn=N
//	coordinator group|txn ID [addr=A] [alive=false] [inc=INCARNATION]
//	expect-error CODE                 (the last command, or one of its items, failed with CODE)
//	expect partition t/0 [leader=1] [isr=1,3] [replicas=..] [leader_epoch=N] [partition_epoch=N]
//	                [lost=B/DIR]  (the last ISR member that lost its logs, and its directory; - for none)
//	expect broker 2 [fenced=true] [epoch=N] [dir=D] [shutting-down=true]
//	expect topic t [partitions=N] [k=v]      expect no-topic t
//	expect leaders t 1,2,3            (leaders of t's partitions in order)
//	expect assignment group/0 owner=7 [epoch=N] [pid=P]
//	expect owners group 7,7,8,8       (owners of every partition in order)
//	expect producer-ids first=N count=N
//	expect offline=N | under-replicated=N
//	expect remaining=N                (the last controlled-shutdown's answer)
//	expect version=N                  (the index of the last change)
//	placement-rule N                  (the rule later commands name; default: this build's)
//
// After every command the machine's invariants are checked, and at the end of
// a file every command is replayed on a fresh machine and on a machine
// restored from a snapshot taken half-way: all must reach the same image.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScenario(t, f) })
	}
}

type scenario struct {
	t       *testing.T
	m       *Machine
	index   uint64
	cmds    []*controllerv1.Command
	last    Result
	lastErr error
	checked bool // the last error was expected by an expect-error line
	where   string
	rule    uint32 // the placement rule commands name, as a leader of this build would
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &scenario{t: t, m: New(), checked: true, rule: MaxPlacementRule}
	s.apply(&controllerv1.Command{Command: &controllerv1.Command_Bootstrap{Bootstrap: &controllerv1.BootstrapCommand{ClusterId: "test"}}})
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s.where = fmt.Sprintf("%s:%d: %s", file, i+1, line)
		fields := strings.Fields(line)
		switch fields[0] {
		case "expect-error":
			s.expectError(fields[1:])
		case "expect":
			s.expect(fields[1:])
		case "placement-rule":
			s.rule = uint32(s.int(fields[1]))
		default:
			if !s.checked {
				t.Fatalf("%s: the command before failed unexpectedly: %v", s.where, s.lastErr)
			}
			s.apply(s.command(fields))
		}
	}
	if !s.checked {
		t.Fatalf("%s: the last command failed unexpectedly: %v", s.where, s.lastErr)
	}
	s.replay()
}

func (s *scenario) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s: %s", s.where, fmt.Sprintf(format, args...))
}

func (s *scenario) apply(cmd *controllerv1.Command) {
	s.t.Helper()
	s.index++
	cmd.PlacementRule = s.rule
	s.cmds = append(s.cmds, cmd)
	before := s.m.img.Version()
	s.last, s.lastErr = s.m.Apply(s.index, cmd)
	s.checked = s.lastErr == nil && itemErrors(s.last.Reply) == nil
	if len(s.last.Records) > 0 && s.m.img.Version() != metadata.Version(s.index) {
		s.fatalf("records produced but the version is %d, not %d", s.m.img.Version(), s.index)
	}
	if len(s.last.Records) == 0 && s.m.img.Version() != before {
		s.fatalf("no records but the version moved")
	}
	if err := checkInvariants(s.m.img); err != nil {
		s.fatalf("invariant broken: %v", err)
	}
}

// itemErrors lists the per-item error codes of a reply.
func itemErrors(reply proto.Message) []skeinv1.ErrorCode {
	var out []skeinv1.ErrorCode
	add := func(c int32) {
		if c != 0 {
			out = append(out, skeinv1.ErrorCode(c))
		}
	}
	switch r := reply.(type) {
	case *controllerv1.CreateTopicsResponse:
		for _, x := range r.GetTopics() {
			add(x.GetErrorCode())
		}
	case *controllerv1.DeleteTopicsResponse:
		for _, x := range r.GetTopics() {
			add(x.GetErrorCode())
		}
	case *controllerv1.CreatePartitionsResponse:
		for _, x := range r.GetTopics() {
			add(x.GetErrorCode())
		}
	case *controllerv1.AlterConfigsResponse:
		add(r.GetResult().GetErrorCode())
	case *controllerv1.AlterPartitionResponse:
		for _, x := range r.GetPartitions() {
			add(x.GetErrorCode())
		}
	case *controllerv1.ElectLeadersResponse:
		for _, x := range r.GetResults() {
			add(x.GetErrorCode())
		}
	}
	return out
}

func (s *scenario) expectError(args []string) {
	if len(args) != 1 {
		s.fatalf("expect-error takes one code")
	}
	want, ok := skeinv1.ErrorCode_value[args[0]]
	if !ok {
		s.fatalf("unknown error code %s", args[0])
	}
	got := itemErrors(s.last.Reply)
	if s.lastErr != nil {
		got = append(got, skeinv1.ErrorCode(code(s.lastErr)))
	}
	if !slices.Contains(got, skeinv1.ErrorCode(want)) {
		s.fatalf("want %s, the last command answered %v (err %v)", args[0], got, s.lastErr)
	}
	s.checked = true
}

// kv splits "k=v" arguments; bare words map to "".
func kv(args []string) (map[string]string, []string) {
	m := map[string]string{}
	var order []string
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
		order = append(order, k)
	}
	return m, order
}

func (s *scenario) int(v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		s.fatalf("not a number: %q", v)
	}
	return n
}

func (s *scenario) ints(v string) []int32 {
	var out []int32
	if v == "" || v == "-" {
		return out
	}
	for _, x := range strings.Split(v, ",") {
		out = append(out, int32(s.int(x)))
	}
	return out
}

func (s *scenario) topicPartition(v string) (string, int32) {
	topic, p, ok := strings.Cut(v, "/")
	if !ok {
		s.fatalf("want topic/partition, got %q", v)
	}
	return topic, int32(s.int(p))
}

func (s *scenario) brokerEpoch(id int32, args map[string]string) int64 {
	if e, ok := args["epoch"]; ok {
		return s.int(e)
	}
	b, _ := s.m.img.Broker(metadata.BrokerID(id))
	return b.GetBrokerEpoch()
}

func kind(v string) controllerv1.CoordinatorKind {
	if v == "txn" {
		return controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION
	}
	return controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP
}

func (s *scenario) command(f []string) *controllerv1.Command {
	args, order := kv(f[1:])
	switch f[0] {
	case "register-broker":
		id := int32(s.int(f[1]))
		inc := args["incarnation"]
		if inc == "" {
			inc = "inc-" + f[1]
		}
		dir, ok := args["dir"]
		if !ok {
			dir = "dir-" + f[1]
		}
		return &controllerv1.Command{Command: &controllerv1.Command_RegisterBroker{RegisterBroker: &controllerv1.RegisterBrokerRequest{
			BrokerId: id, GrpcAddr: "127.0.0.1:" + f[1], Rack: args["rack"], IncarnationId: inc, LogDirId: dir}}}
	case "fence-broker":
		id := int32(s.int(f[1]))
		return &controllerv1.Command{Command: &controllerv1.Command_FenceBroker{FenceBroker: &controllerv1.FenceBrokerCommand{
			BrokerId: id, BrokerEpoch: s.brokerEpoch(id, args), Reason: "test"}}}
	case "unfence-broker":
		id := int32(s.int(f[1]))
		return &controllerv1.Command{Command: &controllerv1.Command_UnfenceBroker{UnfenceBroker: &controllerv1.UnfenceBrokerCommand{
			BrokerId: id, BrokerEpoch: s.brokerEpoch(id, args)}}}
	case "controlled-shutdown":
		id := int32(s.int(f[1]))
		return &controllerv1.Command{Command: &controllerv1.Command_ControlledShutdown{ControlledShutdown: &controllerv1.ControlledShutdownRequest{
			BrokerId: id, BrokerEpoch: s.brokerEpoch(id, args)}}}
	case "create-topic":
		ct := &controllerv1.CreatableTopic{Name: f[1], Configs: map[string]string{}}
		validateOnly := false
		for _, k := range order[1:] {
			switch v := args[k]; k {
			case "partitions":
				ct.Partitions = int32(s.int(v))
			case "rf":
				ct.ReplicationFactor = int32(s.int(v))
			case "validate-only":
				validateOnly = true
			default:
				ct.Configs[k] = v
			}
		}
		return &controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: &controllerv1.CreateTopicsRequest{
			Topics: []*controllerv1.CreatableTopic{ct}, ValidateOnly: validateOnly}}}
	case "create-topics": // several names, same shape: create-topics a,b,a partitions=1
		req := &controllerv1.CreateTopicsRequest{}
		for _, name := range strings.Split(f[1], ",") {
			req.Topics = append(req.Topics, &controllerv1.CreatableTopic{Name: name, Partitions: int32(s.int(args["partitions"]))})
		}
		return &controllerv1.Command{Command: &controllerv1.Command_CreateTopics{CreateTopics: req}}
	case "delete-topic":
		return &controllerv1.Command{Command: &controllerv1.Command_DeleteTopics{DeleteTopics: &controllerv1.DeleteTopicsRequest{Names: f[1:]}}}
	case "create-partitions":
		return &controllerv1.Command{Command: &controllerv1.Command_CreatePartitions{CreatePartitions: &controllerv1.CreatePartitionsRequest{
			Topics: []*controllerv1.PartitionCount{{Name: f[1], Count: int32(s.int(args["count"]))}}}}}
	case "alter-configs":
		req := &controllerv1.AlterConfigsRequest{Topic: f[1], Configs: map[string]string{}}
		for _, k := range order[1:] {
			if k == "validate-only" {
				req.ValidateOnly = true
				continue
			}
			req.Configs[k] = args[k]
		}
		return &controllerv1.Command{Command: &controllerv1.Command_AlterConfigs{AlterConfigs: req}}
	case "alter-partition":
		topic, p := s.topicPartition(f[1])
		cur, _ := s.m.img.Partition(topic, p)
		broker := int32(s.int(args["broker"]))
		ch := &controllerv1.PartitionIsrChange{Topic: topic, Partition: p, LeaderEpoch: cur.GetLeaderEpoch(),
			PartitionEpoch: cur.GetPartitionEpoch(), NewIsr: s.ints(args["isr"])}
		if v, ok := args["leader-epoch"]; ok {
			ch.LeaderEpoch = int32(s.int(v))
		}
		if v, ok := args["partition-epoch"]; ok {
			ch.PartitionEpoch = int32(s.int(v))
		}
		if v, ok := args["member-epochs"]; ok {
			for i, e := range strings.Split(v, ",") {
				if e == "cur" {
					b, _ := s.m.img.Broker(metadata.BrokerID(ch.NewIsr[i]))
					ch.NewIsrBrokerEpochs = append(ch.NewIsrBrokerEpochs, b.GetBrokerEpoch())
					continue
				}
				ch.NewIsrBrokerEpochs = append(ch.NewIsrBrokerEpochs, s.int(e))
			}
		}
		return &controllerv1.Command{Command: &controllerv1.Command_AlterPartition{AlterPartition: &controllerv1.AlterPartitionRequest{
			BrokerId: broker, BrokerEpoch: s.brokerEpoch(broker, args), Partitions: []*controllerv1.PartitionIsrChange{ch}}}}
	case "elect-leaders":
		req := &controllerv1.ElectLeadersRequest{Type: controllerv1.ElectionType_ELECTION_TYPE_PREFERRED}
		if f[1] == "unclean" {
			req.Type = controllerv1.ElectionType_ELECTION_TYPE_UNCLEAN
		}
		for _, x := range f[2:] {
			if topic, p, ok := strings.Cut(x, "/"); ok {
				req.Partitions = append(req.Partitions, &controllerv1.TopicPartitions{Topic: topic, Partitions: []int32{int32(s.int(p))}})
			} else {
				req.Partitions = append(req.Partitions, &controllerv1.TopicPartitions{Topic: x})
			}
		}
		return &controllerv1.Command{Command: &controllerv1.Command_ElectLeaders{ElectLeaders: req}}
	case "move-leader": // move-leader t/0 from=1 epoch=0 candidates=2,3
		topic, part, _ := strings.Cut(f[1], "/")
		c := &controllerv1.MoveLeaderCommand{Topic: topic, Partition: int32(s.int(part)), Leader: int32(s.int(args["from"])), LeaderEpoch: int32(s.int(args["epoch"])), Reason: "scenario"}
		for _, x := range strings.Split(args["candidates"], ",") {
			c.Candidates = append(c.Candidates, int32(s.int(x)))
		}
		return &controllerv1.Command{Command: &controllerv1.Command_MoveLeader{MoveLeader: c}}
	case "allocate-producer-ids":
		req := &controllerv1.AllocateProducerIdsRequest{NodeId: int32(s.int(cmpOr(args["node"], "0")))}
		if v, ok := args["count"]; ok {
			req.Count = int32(s.int(v))
		}
		if v, ok := args["epoch"]; ok {
			req.BrokerEpoch = s.int(v)
		}
		return &controllerv1.Command{Command: &controllerv1.Command_AllocateProducerIds{AllocateProducerIds: req}}
	case "create-internal-topics":
		return &controllerv1.Command{Command: &controllerv1.Command_CreateInternalTopics{CreateInternalTopics: &controllerv1.CreateInternalTopicsCommand{
			ConsumerOffsetsPartitions: int32(s.int(args["offsets"])), TransactionStatePartitions: int32(s.int(args["txn"]))}}}
	case "coordinator":
		id := int32(s.int(f[2]))
		rec := &controllerv1.CoordinatorRecord{Id: id, Kind: kind(f[1]), GrpcAddr: cmpOr(args["addr"], "127.0.0.1:"+f[2]), Alive: args["alive"] != "false",
			Incarnation: args["inc"]}
		return &controllerv1.Command{Command: &controllerv1.Command_CoordinatorChange{CoordinatorChange: &controllerv1.CoordinatorChangeCommand{Coordinator: rec}}}
	}
	s.fatalf("unknown command %q", f[0])
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *scenario) expect(f []string) {
	s.t.Helper()
	img := s.m.img
	args, order := kv(f)
	switch f[0] {
	case "partition":
		topic, p := s.topicPartition(f[1])
		pr, ok := img.Partition(topic, p)
		if !ok {
			s.fatalf("no partition %s/%d", topic, p)
		}
		for _, k := range order[2:] {
			v := args[k]
			var got, want string
			switch k {
			case "leader":
				got, want = strconv.Itoa(int(pr.GetLeader())), v
			case "isr":
				got, want = fmt.Sprint(pr.GetIsr()), fmt.Sprint(s.ints(v))
			case "replicas":
				got, want = fmt.Sprint(pr.GetReplicas()), fmt.Sprint(s.ints(v))
			case "leader_epoch":
				got, want = strconv.Itoa(int(pr.GetLeaderEpoch())), v
			case "partition_epoch":
				got, want = strconv.Itoa(int(pr.GetPartitionEpoch())), v
			case "lost":
				got, want = "-", v
				if l := pr.GetLostIsrReplica(); l != nil {
					got = fmt.Sprintf("%d/%s", l.GetBroker(), l.GetLogDirId())
				}
			default:
				s.fatalf("unknown partition field %s", k)
			}
			if got != want {
				s.fatalf("%s: got %s, want %s (partition %v)", k, got, want, pr)
			}
		}
	case "broker":
		b, ok := img.Broker(metadata.BrokerID(s.int(f[1])))
		if !ok {
			s.fatalf("no broker %s", f[1])
		}
		if v, ok := args["fenced"]; ok && strconv.FormatBool(b.GetFenced()) != v {
			s.fatalf("fenced: got %v", b.GetFenced())
		}
		if v, ok := args["epoch"]; ok && b.GetBrokerEpoch() != s.int(v) {
			s.fatalf("epoch: got %d", b.GetBrokerEpoch())
		}
		if v, ok := args["dir"]; ok && b.GetLogDirId() != v {
			s.fatalf("dir: got %q", b.GetLogDirId())
		}
		if v, ok := args["shutting-down"]; ok && strconv.FormatBool(b.GetInControlledShutdown()) != v {
			s.fatalf("shutting-down: got %v", b.GetInControlledShutdown())
		}
	case "topic":
		tp, ok := img.Topic(f[1])
		if !ok {
			s.fatalf("no topic %s", f[1])
		}
		for _, k := range order[2:] {
			v := args[k]
			if k == "partitions" {
				if got := img.PartitionCount(f[1]); got != int32(s.int(v)) {
					s.fatalf("partitions: got %d", got)
				}
				continue
			}
			got, has := tp.GetConfigs()[k]
			if v == "" && has || v != "" && got != v {
				s.fatalf("config %s: got %q (set %v)", k, got, has)
			}
		}
	case "no-topic":
		if _, ok := img.Topic(f[1]); ok {
			s.fatalf("topic %s exists", f[1])
		}
	case "leaders":
		var got []int32
		for _, p := range img.Partitions(f[1]) {
			got = append(got, p.GetLeader())
		}
		if fmt.Sprint(got) != fmt.Sprint(s.ints(f[2])) {
			s.fatalf("leaders: got %v", got)
		}
	case "assignment":
		k, p, _ := strings.Cut(f[1], "/")
		a, ok := img.Assignment(kind(k), int32(s.int(p)))
		if !ok {
			s.fatalf("no assignment %s", f[1])
		}
		if v, ok := args["owner"]; ok && a.GetOwner() != int32(s.int(v)) {
			s.fatalf("owner: got %d", a.GetOwner())
		}
		if v, ok := args["epoch"]; ok && a.GetCoordinatorEpoch() != int32(s.int(v)) {
			s.fatalf("epoch: got %d", a.GetCoordinatorEpoch())
		}
		if v, ok := args["pid"]; ok && (a.ProducerId == nil || a.GetProducerId() != s.int(v)) {
			s.fatalf("producer id: got %v", a.ProducerId)
		}
	case "owners":
		var got []int32
		for _, a := range img.Assignments(kind(f[1])) {
			got = append(got, a.GetOwner())
		}
		if fmt.Sprint(got) != fmt.Sprint(s.ints(f[2])) {
			s.fatalf("owners: got %v", got)
		}
	case "producer-ids":
		r, ok := s.last.Reply.(*controllerv1.AllocateProducerIdsResponse)
		if !ok {
			s.fatalf("the last command did not allocate producer ids")
		}
		if r.GetFirstProducerId() != s.int(args["first"]) || r.GetCount() != int32(s.int(args["count"])) {
			s.fatalf("got first=%d count=%d", r.GetFirstProducerId(), r.GetCount())
		}
	default:
		for _, k := range order {
			var got int
			switch k {
			case "offline":
				got = img.OfflinePartitions()
			case "under-replicated":
				got = img.UnderReplicatedPartitions()
			case "version":
				got = int(img.Version())
			case "remaining":
				r, ok := s.last.Reply.(*controllerv1.ControlledShutdownResponse)
				if !ok {
					s.fatalf("the last command was no controlled shutdown")
				}
				got = int(r.GetRemainingLeaderships())
			default:
				s.fatalf("unknown expectation %q", k)
			}
			if got != int(s.int(args[k])) {
				s.fatalf("%s: got %d", k, got)
			}
		}
	}
}

// checkInvariants holds the rules of the package doc.
func checkInvariants(img *metadata.Image) error {
	for _, tp := range img.Topics() {
		for _, p := range img.Partitions(tp.GetName()) {
			name := fmt.Sprintf("%s/%d", p.GetTopic(), p.GetPartition())
			if len(p.GetIsr()) == 0 && (p.GetLeader() >= 0 || p.GetLostIsrReplica() == nil) {
				return fmt.Errorf("%s: empty ISR with leader %d, lost replica %v", name, p.GetLeader(), p.GetLostIsrReplica())
			}
			if l := p.GetLostIsrReplica(); l != nil {
				if len(p.GetIsr()) > 0 || !contains(p.GetReplicas(), l.GetBroker()) {
					return fmt.Errorf("%s: lost replica %v beside ISR %v, replicas %v", name, l, p.GetIsr(), p.GetReplicas())
				}
				// Back with the lost directory, the broker would have its
				// place again.
				if b, ok := img.Broker(metadata.BrokerID(l.GetBroker())); ok && b.GetLogDirId() == l.GetLogDirId() {
					return fmt.Errorf("%s: lost replica %v, though broker %d is back with that directory", name, l, l.GetBroker())
				}
			}
			seen := map[int32]bool{}
			for _, r := range p.GetReplicas() {
				if seen[r] {
					return fmt.Errorf("%s: replica %d twice", name, r)
				}
				seen[r] = true
			}
			for _, r := range p.GetIsr() {
				if !seen[r] {
					return fmt.Errorf("%s: ISR member %d is not a replica", name, r)
				}
				if !img.IsLive(metadata.BrokerID(r)) && !(p.GetLeader() < 0 && len(p.GetIsr()) == 1) {
					return fmt.Errorf("%s: fenced broker %d in the ISR %v", name, r, p.GetIsr())
				}
			}
			if p.GetLeader() < 0 {
				for _, r := range p.GetIsr() {
					if b, _ := img.Broker(metadata.BrokerID(r)); img.IsLive(metadata.BrokerID(r)) && !b.GetInControlledShutdown() {
						return fmt.Errorf("%s: offline, though ISR member %d could lead", name, r)
					}
				}
			}
			if l := p.GetLeader(); l >= 0 {
				if !contains(p.GetIsr(), l) {
					return fmt.Errorf("%s: leader %d not in the ISR %v", name, l, p.GetIsr())
				}
				if !img.IsLive(metadata.BrokerID(l)) {
					return fmt.Errorf("%s: leader %d is fenced", name, l)
				}
			}
		}
	}
	return nil
}

// replay applies the scenario's commands again on a fresh machine, and on a
// machine restored from a snapshot taken half-way: each must reach the image
// the scenario reached, byte for byte.
func (s *scenario) replay() {
	s.t.Helper()
	want := s.m.img.ToProto()
	fresh := New()
	half := len(s.cmds) / 2
	var restored *Machine
	for i, cmd := range s.cmds {
		if i == half {
			snap, err := proto.Marshal(fresh.img.ToProto())
			if err != nil {
				s.t.Fatal(err)
			}
			var p controllerv1.MetadataImage
			if err := proto.Unmarshal(snap, &p); err != nil {
				s.t.Fatal(err)
			}
			if restored, err = Restore(&p); err != nil {
				s.t.Fatal(err)
			}
		}
		_, _ = fresh.Apply(uint64(i+1), proto.CloneOf(cmd))
		if restored != nil {
			_, _ = restored.Apply(uint64(i+1), proto.CloneOf(cmd))
		}
	}
	if !proto.Equal(want, fresh.img.ToProto()) {
		s.t.Errorf("replay on a fresh machine differs:\n got %v\nwant %v", fresh.img.ToProto(), want)
	}
	if restored != nil && !proto.Equal(want, restored.img.ToProto()) {
		s.t.Errorf("replay from a snapshot differs:\n got %v\nwant %v", restored.img.ToProto(), want)
	}
}

var _ = errs.None
