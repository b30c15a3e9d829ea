package fsm

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/errs"
	"skein/libs/metadata"
)

// Result is what one command did: the records it produced, in order (already
// applied to the image), and the reply for the request it carried (nil for
// the controller's own commands). Records may be non-empty even when Apply
// returns an error: what was applied before the refusal stays applied.
type Result struct {
	Records []*controllerv1.MetadataRecord
	Reply   proto.Message
}

// Machine holds the metadata image and applies commands to it.
type Machine struct {
	img *metadata.Image
}

// New returns a machine with an empty image.
func New() *Machine { return &Machine{img: metadata.New("")} }

// Restore returns a machine holding a snapshot's image.
func Restore(p *controllerv1.MetadataImage) (*Machine, error) {
	img, err := metadata.FromProto(p)
	if err != nil {
		return nil, err
	}
	return &Machine{img: img}, nil
}

// Image is the current image. The caller must not change it; the machine
// changes it on the next Apply.
func (m *Machine) Image() *metadata.Image { return m.img }

// ErrNewerRule is what Apply answers for an entry naming a placement rule
// newer than this build's: it changes nothing, and the controller must stop
// applying the log, since going on would leave its image unlike the others'.
var ErrNewerRule = errors.New("the entry names a newer placement rule than this build applies")

// Apply applies the command of the Raft entry at index.
func (m *Machine) Apply(index uint64, cmd *controllerv1.Command) (Result, error) {
	if Version(index) < m.img.Version() {
		return Result{}, errs.Errorf(errs.UnknownServerError, "entry %d is behind the image's version %d", index, m.img.Version())
	}
	if r := cmd.GetPlacementRule(); r > MaxPlacementRule {
		return Result{}, fmt.Errorf("entry %d: placement rule %d, this build applies up to %d: %w", index, r, MaxPlacementRule, ErrNewerRule)
	}
	t := &tx{img: m.img, version: index, placementRule: cmd.GetPlacementRule()}
	reply, err := t.dispatch(cmd)
	return Result{Records: t.records, Reply: reply}, err
}

// Version is the metadata version type, re-exported for the shell.
type Version = metadata.Version

// tx collects the records of one command, applying each batch to the image
// as it goes so later steps of the command see earlier ones.
type tx struct {
	img     *metadata.Image
	version uint64
	records []*controllerv1.MetadataRecord
	// placementRule is the rule the command names (see place).
	placementRule uint32
}

// put applies records. An error here means the machine built a record the
// image refuses: a bug, reported as UNKNOWN_SERVER_ERROR, never a panic.
func (t *tx) put(recs ...*controllerv1.MetadataRecord) error {
	if len(recs) == 0 {
		return nil
	}
	if err := t.img.Apply(&controllerv1.MetadataDelta{Version: t.version, Records: recs}); err != nil {
		return errs.Errorf(errs.UnknownServerError, "controller built an inconsistent change: %v", err)
	}
	t.records = append(t.records, recs...)
	return nil
}

func (t *tx) dispatch(cmd *controllerv1.Command) (proto.Message, error) {
	switch c := cmd.GetCommand().(type) {
	case *controllerv1.Command_Bootstrap:
		return nil, t.bootstrap(c.Bootstrap)
	case *controllerv1.Command_RegisterBroker:
		return t.registerBroker(c.RegisterBroker)
	case *controllerv1.Command_UnfenceBroker:
		return nil, t.unfenceBroker(c.UnfenceBroker)
	case *controllerv1.Command_FenceBroker:
		return nil, t.fenceBroker(c.FenceBroker)
	case *controllerv1.Command_ControlledShutdown:
		return t.controlledShutdown(c.ControlledShutdown)
	case *controllerv1.Command_CreateTopics:
		return t.createTopics(c.CreateTopics)
	case *controllerv1.Command_DeleteTopics:
		return t.deleteTopics(c.DeleteTopics)
	case *controllerv1.Command_CreatePartitions:
		return t.createPartitions(c.CreatePartitions)
	case *controllerv1.Command_AlterConfigs:
		return t.alterConfigs(c.AlterConfigs)
	case *controllerv1.Command_AlterPartition:
		return t.alterPartition(c.AlterPartition)
	case *controllerv1.Command_ElectLeaders:
		return t.electLeaders(c.ElectLeaders)
	case *controllerv1.Command_AllocateProducerIds:
		return t.allocateProducerIDs(c.AllocateProducerIds)
	case *controllerv1.Command_CreateInternalTopics:
		return nil, t.createInternalTopics(c.CreateInternalTopics)
	case *controllerv1.Command_CoordinatorChange:
		return nil, t.coordinatorChange(c.CoordinatorChange)
	case *controllerv1.Command_MoveLeader:
		return nil, t.moveLeader(c.MoveLeader)
	case *controllerv1.Command_CreateAcls:
		return t.createAcls(c.CreateAcls)
	case *controllerv1.Command_DeleteAcls:
		return t.deleteAcls(c.DeleteAcls)
	}
	return nil, errs.Errorf(errs.InvalidRequest, "empty or unknown command %T", cmd.GetCommand())
}

func (t *tx) bootstrap(c *controllerv1.BootstrapCommand) error {
	if t.img.ClusterID() != "" {
		return nil // bootstrapped already: a later leader's attempt is a no-op
	}
	if c.GetClusterId() == "" {
		return errs.Errorf(errs.InvalidRequest, "bootstrap without a cluster id")
	}
	t.img.SetClusterID(c.GetClusterId())
	return nil
}

// Describe names a command for logs.
func Describe(cmd *controllerv1.Command) string {
	switch c := cmd.GetCommand().(type) {
	case *controllerv1.Command_FenceBroker:
		return fmt.Sprintf("fence broker %d epoch %d (%s)", c.FenceBroker.GetBrokerId(), c.FenceBroker.GetBrokerEpoch(), c.FenceBroker.GetReason())
	case *controllerv1.Command_MoveLeader:
		m := c.MoveLeader
		return fmt.Sprintf("move leadership of %s/%d away from broker %d at leader epoch %d (%s)", m.GetTopic(), m.GetPartition(), m.GetLeader(), m.GetLeaderEpoch(), m.GetReason())
	case *controllerv1.Command_UnfenceBroker:
		return fmt.Sprintf("unfence broker %d epoch %d", c.UnfenceBroker.GetBrokerId(), c.UnfenceBroker.GetBrokerEpoch())
	case nil:
		return "empty command"
	default:
		return string(cmd.ProtoReflect().WhichOneof(cmd.ProtoReflect().Descriptor().Oneofs().Get(0)).Name())
	}
}
