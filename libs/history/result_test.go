package history

import (
	"strings"
	"testing"
)

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestTablePrintsEveryKindAndBoundedExamples(t *testing.T) {
	h, log := clean()
	for o := range int64(6) {
		delete(log[0], o) // six lost writes
	}
	r := Check(h, log, Options{MaxExamples: 2, LinearizabilityMaxOps: -1})
	s := r.String()
	for _, k := range Kinds {
		if !strings.Contains(s, string(k)) {
			t.Errorf("no row for %s:\n%s", k, s)
		}
	}
	if !containsAll(s, "lost-write               5", `p0@0 "a-0": acknowledged to a; the log has nothing there`,
		`p0@1 "a-1"`, "… 3 more", "INVALID: 5 anomalies", "history: 7 acknowledged, 2 unknown, 1 not written; 6 polls (14 records); 6 commits") {
		t.Errorf("table:\n%s", s)
	}
	if strings.Contains(s, `p0@2 "a-2"`) {
		t.Errorf("more than 2 examples:\n%s", s)
	}
	if r.Count(LostWrite) != 5 || len(r.Of(LostWrite)) != 5 || r.Counts()[Unseen] != 0 || len(r.Counts()) != len(Kinds) {
		t.Errorf("counts %v", r.Counts())
	}
}

func TestTableDefaultsToThreeExamples(t *testing.T) {
	h, log := clean()
	delete(log, 0)
	s := Check(h, log, Options{}).String()
	if !containsAll(s, `p0@2 "a-2"`, "… 2 more") || strings.Contains(s, `p0@3 "a-3"`) {
		t.Errorf("table:\n%s", s)
	}
}

func TestAnomaliesAreOrdered(t *testing.T) {
	h, log := clean()
	delete(log[0], 3)
	delete(log[0], 1)
	log[1][5] = "a-0"
	r := Check(h, log, Options{LinearizabilityMaxOps: -1})
	var got []string
	for _, a := range r.Anomalies {
		got = append(got, string(a.Kind)+" "+a.String())
	}
	want := []string{
		`lost-write p0@1 "a-1": acknowledged to a; the log has nothing there`,
		`lost-write p0@3 "a-3": acknowledged to a; the log has nothing there`,
		`duplicate p0@0 "a-0": at p0@0 (log, ack:a, poll:m1, poll:tail) and p1@5 (log)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
