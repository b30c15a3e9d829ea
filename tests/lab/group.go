package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"skein/libs/history"
	"skein/tests/e2e"
)

// member is one REST group member: what it must send back on its next
// fetch, and what it was last assigned.
type member struct {
	name       string
	id         string
	epoch      int32
	positions  []position
	assignment []int32
	seen       map[string]bool // values it polled
}

type position struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    e2e.Int64 `json:"offset"`
}

type topicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func flatten(a []topicPartitions) []int32 {
	var out []int32
	for _, tp := range a {
		out = append(out, tp.Partitions...)
	}
	slices.Sort(out)
	return out
}

func (l *lab) join(group, topic, name string) (*member, error) {
	var resp struct {
		MemberID   string            `json:"member_id"`
		Epoch      int32             `json:"member_epoch"`
		Assignment []topicPartitions `json:"assignment"`
	}
	body := map[string]any{"topics": []string{topic}, "auto_offset_reset": "earliest", "session_timeout_ms": 6000}
	if err := l.call(20*time.Second, "POST", "/v1/groups/"+group+"/members", body, &resp); err != nil {
		return nil, fmt.Errorf("member %s joining: %w", name, err)
	}
	return &member{name: name, id: resp.MemberID, epoch: resp.Epoch, assignment: flatten(resp.Assignment), seen: map[string]bool{}}, nil
}

// fetch is one fetch of m (also its heartbeat), recorded in h. It answers
// the values it returned.
func (l *lab) fetch(h *history.Recorder, group string, m *member, maxWait time.Duration) ([]string, error) {
	body := map[string]any{"member_epoch": m.epoch, "max_wait_ms": maxWait.Milliseconds(), "max_records": 1000}
	if m.positions != nil {
		body["positions"] = m.positions
	}
	var resp struct {
		Records []struct {
			Partition int32     `json:"partition"`
			Offset    e2e.Int64 `json:"offset"`
			Value     string    `json:"value"`
		} `json:"records"`
		Positions  []position        `json:"positions"`
		Epoch      int32             `json:"member_epoch"`
		Assignment []topicPartitions `json:"assignment"`
	}
	start := time.Now()
	if err := l.call(20*time.Second, "POST", "/v1/groups/"+group+"/members/"+m.id+"/records", body, &resp); err != nil {
		return nil, fmt.Errorf("member %s fetching: %w", m.name, err)
	}
	m.epoch, m.positions, m.assignment = resp.Epoch, resp.Positions, flatten(resp.Assignment)
	if m.positions == nil {
		m.positions = []position{}
	}
	poll := history.Poll{Consumer: m.id, Group: group, MemberEpoch: m.epoch, Assignment: m.assignment, Invoke: start, Complete: time.Now()}
	var values []string
	for _, r := range resp.Records {
		poll.Records = append(poll.Records, history.Record{Partition: r.Partition, Offset: int64(r.Offset), Value: r.Value})
		values = append(values, r.Value)
		m.seen[r.Value] = true
	}
	h.Poll(poll)
	return values, nil
}

// commit commits m's positions, recorded in h.
func (l *lab) commit(h *history.Recorder, group string, m *member) error {
	// A position of -1 is a partition not started yet: nothing to commit.
	var started []position
	for _, p := range m.positions {
		if p.Offset >= 0 {
			started = append(started, p)
		}
	}
	if len(started) == 0 {
		return nil
	}
	var resp struct {
		Results []struct {
			Partition int32  `json:"partition"`
			ErrorCode string `json:"error_code"`
			Message   string `json:"message"`
		} `json:"results"`
	}
	start := time.Now()
	err := l.call(20*time.Second, "POST", "/v1/groups/"+group+"/offsets",
		map[string]any{"member_id": m.id, "member_epoch": m.epoch, "offsets": started}, &resp)
	end := time.Now()
	for i, p := range started {
		c := history.Commit{Group: group, Member: m.id, MemberEpoch: m.epoch, Partition: p.Partition, Offset: int64(p.Offset), OK: err == nil, Invoke: start, Complete: end}
		if err != nil {
			c.Err = err.Error()
		} else if i < len(resp.Results) && resp.Results[i].ErrorCode != "NONE" && resp.Results[i].ErrorCode != "" {
			c.OK, c.Err = false, resp.Results[i].ErrorCode+": "+resp.Results[i].Message
		}
		h.Commit(c)
	}
	return err
}

func runGroup(ctx context.Context, o *Options) (out *Outcome, err error) {
	fmt.Fprintln(o.Out, "demo group: how a consumer group shares partitions, and what a crash before a commit costs")
	l, err := startLab(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { l.stop(err != nil) }()
	const topic, group = "lab-group", "lab"
	if _, err := l.createTopic(topic, 6, nil); err != nil {
		return nil, err
	}
	l.stepf("created topic %s with 6 partitions", topic)
	h := history.NewRecorder()
	round := 0
	produceRound := func() error {
		round++
		for p := range int32(6) {
			v := make([]string, 5)
			for i := range v {
				v[i] = fmt.Sprintf("round%d-p%d-%d", round, p, i)
			}
			if err := l.waitFor(10*time.Second, "a produce", func() error {
				if c := l.produce(h, "producer", topic, p, -1, v, 10*time.Second); c[0] != "" {
					return fmt.Errorf("%s", c[0])
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}
	// step runs one fetch-and-commit round of each member.
	step := func(commit bool, ms ...*member) (map[*member][]string, error) {
		got := map[*member][]string{}
		for _, m := range ms {
			v, err := l.fetch(h, group, m, 100*time.Millisecond)
			if err != nil {
				return nil, err
			}
			got[m] = v
			if commit {
				if err := l.commit(h, group, m); err != nil {
					return nil, err
				}
			}
		}
		return got, nil
	}
	// until fetches (and commits) with ms until cond holds.
	until := func(what string, commit bool, cond func() bool, ms ...*member) (map[*member]int, error) {
		read := map[*member]int{}
		err := l.waitFor(25*time.Second, what, func() error {
			got, err := step(commit, ms...)
			if err != nil {
				return err
			}
			for m, v := range got {
				read[m] += len(v)
			}
			if !cond() {
				var s []string
				for _, m := range ms {
					s = append(s, fmt.Sprintf("%s %v", m.name, m.assignment))
				}
				return fmt.Errorf("%s", strings.Join(s, ", "))
			}
			return nil
		})
		return read, err
	}

	a, err := l.join(group, topic, "A")
	if err != nil {
		return nil, err
	}
	if _, err := until("A owning 6 partitions", true, func() bool { return len(a.assignment) == 6 }, a); err != nil {
		return nil, err
	}
	l.stepf("member A joined group %s: it owns all 6 partitions %v", group, a.assignment)
	b, err := l.join(group, topic, "B")
	if err != nil {
		return nil, err
	}
	joined := time.Now()
	if _, err := until("a 3/3 split", true, func() bool { return len(a.assignment) == 3 && len(b.assignment) == 3 }, a, b); err != nil {
		return nil, err
	}
	l.stepf("member B joined; %v later they split the partitions 3/3: A owns %v, B owns %v (A gave up three, B took them only then)",
		time.Since(joined).Round(time.Millisecond), a.assignment, b.assignment)

	if err := produceRound(); err != nil {
		return nil, err
	}
	readA, readB := 0, 0
	if err := l.waitFor(15*time.Second, "both members reading their share", func() error {
		got, err := step(true, a, b)
		if err != nil {
			return err
		}
		readA, readB = readA+len(got[a]), readB+len(got[b])
		if readA+readB < 30 {
			return fmt.Errorf("A read %d, B read %d", readA, readB)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	l.stepf("produced 5 records to each partition: A read %d (from %v), B read %d (from %v), each committed what it read", readA, a.assignment, readB, b.assignment)

	if err := l.call(10*time.Second, "DELETE", "/v1/groups/"+group+"/members/"+a.id, nil, nil); err != nil {
		return nil, err
	}
	left := time.Now()
	if _, err := until("B owning 6 partitions", true, func() bool { return len(b.assignment) == 6 }, b); err != nil {
		return nil, err
	}
	l.stepf("member A left; %v later B owns all 6 partitions %v", time.Since(left).Round(time.Millisecond), b.assignment)

	if err := produceRound(); err != nil {
		return nil, err
	}
	var bRead []string
	if err := l.waitFor(15*time.Second, "B reading round 2", func() error {
		got, err := step(false, b)
		if err != nil {
			return err
		}
		bRead = append(bRead, got[b]...)
		if len(bRead) < 30 {
			return fmt.Errorf("B read %d", len(bRead))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	crashed := time.Now()
	l.stepf("produced 5 more to each partition; B read all %d and then crashed before committing them (it stops calling: no leave, no commit)", len(bRead))

	c, err := l.join(group, topic, "C")
	if err != nil {
		return nil, err
	}
	var cRead []string
	if err := l.waitFor(30*time.Second, "C reading B's partitions", func() error {
		got, err := step(true, c)
		if err != nil {
			return err
		}
		cRead = append(cRead, got[c]...)
		if len(c.assignment) < 6 || len(cRead) < 30 {
			return fmt.Errorf("C owns %v, read %d", c.assignment, len(cRead))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	redelivered := 0
	for _, v := range cRead {
		if slices.Contains(bRead, v) {
			redelivered++
		}
	}
	l.stepf("member C joined; once B's session (6 s) expired, %v after the crash, C owned all 6 partitions and read %d records from the last committed offsets: %d of them are the ones B had read",
		time.Since(crashed).Round(time.Millisecond), len(cRead), redelivered)

	if err := l.call(10*time.Second, "DELETE", "/v1/groups/"+group+"/members/"+c.id, nil, nil); err != nil {
		return nil, err
	}
	final := history.Log{}
	for p := range int32(6) {
		if final[p], err = l.readAll(topic, p); err != nil {
			return nil, err
		}
	}
	total := 0
	for _, recs := range final {
		total += len(recs)
	}
	l.stepf("C committed and left; read the topic back: %d records in %d partitions", total, len(final))
	res := l.audit(h, final)
	out = &Outcome{Acknowledged: res.Acknowledged, Lost: res.Count(history.LostWrite), Failed: failedCounts(h.History()), Redelivered: redelivered, Audit: res, Attempts: 1}
	fmt.Fprintln(o.Out)
	fmt.Fprintf(o.Out, "RE-DELIVERED: %d records were handed out twice, to B and again to C; no record was skipped and none lost.\n", redelivered)
	fmt.Fprintln(o.Out, "Why: the group coordinator gives each partition to one member at a time and moves only the partitions that must move: when B joined, A gave up three and B got them; when A left, B took all six. Where a member starts reading is the group's committed offset. B read records and crashed before committing them, so its successor started from the last commit and got them again: consumer groups deliver at least once. Commit after processing (and make processing idempotent) to live with that; commit before processing and a crash skips records instead.")
	return out, nil
}
