package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	controllerv1 "skein/gen/skein/controller/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/client"
	"skein/libs/metadata"
	"skein/services/gateway/internal/authn"
	"skein/services/gateway/internal/console"
)

// names answers the "name" (topics) or "group" (groups) of each document
// of an event's data.
func names(t *testing.T, data []byte, list, key string) []string {
	t.Helper()
	var doc map[string][]map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	var out []string
	for _, d := range doc[list] {
		out = append(out, d[key].(string))
	}
	return out
}

// Under --authorizer the event stream shows a principal the topics and
// groups it may describe, and of a group the offsets and members' topics
// DescribeGroup would show it; cluster describe is what keeps the stream.
func TestConsoleViewerShowsWhatThePrincipalMayDescribe(t *testing.T) {
	img := metadata.New("c")
	allow := func(p string, r acl.ResourceType, name string, op acl.Operation) *controllerv1.MetadataRecord {
		if r == acl.Cluster {
			name = acl.ClusterName
		}
		return metadata.AclRecord(acl.Binding{Principal: p, Resource: r, Name: name, Pattern: acl.Literal, Operation: op, Permission: acl.Allow})
	}
	if err := img.Apply(&controllerv1.MetadataDelta{Version: 1, Records: []*controllerv1.MetadataRecord{
		allow("User:bob", acl.Cluster, "", acl.Describe),
		allow("User:bob", acl.Topic, "mine", acl.Read),
		allow("User:bob", acl.Group, "billing", acl.Describe),
	}}); err != nil {
		t.Fatal(err)
	}
	z := newAuthorizer(func() *metadata.Image { return img }, map[string]bool{"User:root": true})
	topics := []*skeinv1.TopicDescription{{Name: "mine"}, {Name: "secret"}, {Name: "__consumer_offsets", Internal: true}}
	groups := []*skeinv1.DescribeGroupResponse{
		{Group: "billing", TotalLag: 7, Offsets: []*skeinv1.CommittedOffset{{Topic: "mine", Lag: 2}, {Topic: "secret", Lag: 5}},
			Members: []*skeinv1.GroupMember{{MemberId: "m", Topics: []string{"mine", "secret"}}}},
		{Group: "hidden", Offsets: []*skeinv1.CommittedOffset{{Topic: "mine"}}},
	}
	var traws, graws []json.RawMessage
	var tdocs []consoleTopic
	var gdocs []consoleGroup
	for _, d := range topics {
		tdocs = append(tdocs, consoleTopic{name: d.GetName(), raw: marshalDoc(d)})
		traws = append(traws, marshalDoc(d))
	}
	for _, d := range groups {
		gdocs = append(gdocs, consoleGroup{d: d, raw: marshalDoc(d)})
		graws = append(graws, marshalDoc(d))
	}
	te := console.Event{Name: "topics", Data: listDoc("topics", traws), Payload: tdocs}
	ge := console.Event{Name: "groups", Data: listDoc("groups", graws), Payload: gdocs}
	cluster := console.Event{Name: "cluster", Data: []byte(`{"brokers":[]}`)}
	valid := func() error { return nil }

	bob := newConsoleViewer(z, "User:bob", valid)
	if err := bob.Check(); err != nil {
		t.Fatalf("bob may describe the cluster: %v", err)
	}
	if got := names(t, bob.Show(te), "topics", "name"); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("topics shown to bob: %v, want [mine]", got)
	}
	shown := bob.Show(ge)
	if got := names(t, shown, "groups", "group"); !slices.Equal(got, []string{"billing"}) {
		t.Errorf("groups shown to bob: %v, want [billing]", got)
	}
	if s := string(shown); strings.Contains(s, "secret") || !strings.Contains(s, `"total_lag":"2"`) {
		t.Errorf("billing shown to bob: %s, want its offsets and members on mine only, total lag 2", s)
	}
	if got := string(bob.Show(cluster)); got != `{"brokers":[]}` {
		t.Errorf("cluster shown to bob: %s", got)
	}
	if groups[0].GetTotalLag() != 7 || len(groups[0].GetOffsets()) != 2 || len(groups[0].GetMembers()[0].GetTopics()) != 2 {
		t.Errorf("showing a group to bob changed the document every stream shares: %v", groups[0])
	}

	if got := string(bob.Show(console.Event{Name: "acls", Data: []byte(`{"acls":[1]}`)})); got != `{}` {
		t.Errorf("an event the viewer does not know, shown to bob: %s, want {}", got)
	}

	root := newConsoleViewer(z, "User:root", valid)
	if got := names(t, root.Show(te), "topics", "name"); len(got) != 3 {
		t.Errorf("topics shown to a super user: %v, want all three", got)
	}
	if got := string(root.Show(ge)); got != string(ge.Data) {
		t.Errorf("groups shown to a super user: %s, want %s", got, ge.Data)
	}
	err := newConsoleViewer(z, "User:carol", valid).Check()
	if err == nil || !strings.Contains(err.Error(), "User:carol may not describe the cluster") {
		t.Errorf("carol without cluster describe: %v", err)
	}
}

// An open event stream follows the principal's ACLs: a topic it is let
// describe appears on it, and it ends once cluster describe is revoked.
func TestEventStreamFollowsACLChanges(t *testing.T) {
	e := startTokenAuth(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := e.gw.Client()
	for _, name := range []string{"mine", "secret"} {
		if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	describe := acl.Binding{Principal: "User:dev", Resource: acl.Cluster, Name: acl.ClusterName, Pattern: acl.Literal, Operation: acl.Describe, Permission: acl.Allow}
	mine := acl.Binding{Principal: "User:dev", Resource: acl.Topic, Name: "mine", Pattern: acl.Literal, Operation: acl.Describe, Permission: acl.Allow}
	grant(t, ctx, c, describe)
	grant(t, ctx, c, mine)
	if _, err := c.WaitMetadata(ctx, func(m *metadata.Image) bool { return m.PartitionCount("secret") == 1 }); err != nil {
		t.Fatal(err)
	}

	resp := e.openEvents(t, ctx)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// nextTopics answers the names of the next topics event's topics.
	nextTopics := func() []string {
		t.Helper()
		name := ""
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "event: "); ok {
				name = n
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok && name == "topics" {
				return names(t, []byte(d), "topics", "name")
			}
		}
		t.Fatalf("the stream ended: %v", sc.Err())
		return nil
	}
	if got := nextTopics(); !slices.Equal(got, []string{"mine"}) {
		t.Fatalf("topics shown to User:dev: %v, want [mine]", got)
	}
	grant(t, ctx, c, acl.Binding{Principal: "User:dev", Resource: acl.Topic, Name: "secret", Pattern: acl.Literal, Operation: acl.Describe, Permission: acl.Allow})
	if got := nextTopics(); !slices.Equal(got, []string{"mine", "secret"}) {
		t.Fatalf("topics shown to User:dev once it may describe secret: %v, want [mine secret]", got)
	}
	if _, err := c.DeleteAcls(ctx, acl.Filter{Principal: describe.Principal, Resource: acl.Cluster, Name: acl.ClusterName,
		Pattern: acl.Literal, Operation: acl.Describe, Permission: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream stayed open after User:dev lost cluster describe")
	}
}

// An open event stream ends once the credentials it opened with no longer
// verify: here a token removed from the token file.
func TestEventStreamEndsWhenItsTokenIsRevoked(t *testing.T) {
	e := startTokenAuth(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := e.gw.Client()
	describe := acl.Binding{Principal: "User:dev", Resource: acl.Cluster, Name: acl.ClusterName, Pattern: acl.Literal, Operation: acl.Describe, Permission: acl.Allow}
	grant(t, ctx, c, describe)
	resp := e.openEvents(t, ctx)
	defer resp.Body.Close()
	ended := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
		close(ended)
	}()
	select {
	case <-ended:
		t.Fatal("the stream ended while its token was good")
	case <-time.After(1500 * time.Millisecond):
	}
	e.revokeDevToken(t)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream stayed open after its token was removed")
	}
}

// tokenEnv is a gateway whose callers authenticate with the tokens of a
// file the test can rewrite: "dev-token" is User:dev to start with.
type tokenEnv struct {
	*env
	v    *authn.Verifier
	file string
}

func startTokenAuth(t *testing.T, authorizer bool) *tokenEnv {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tf, []byte("dev-token User:dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := authn.NewVerifier(authn.Config{TokenFile: tf})
	if err != nil {
		t.Fatal(err)
	}
	e := startWith(t, func(c *Config) {
		c.Auth, c.AuthRequired = v, true
		c.Authorizer = authorizer
		c.Logger = slog.New(slog.NewTextHandler(&syncBuffer{}, nil))
	})
	e.waitReady()
	return &tokenEnv{env: e, v: v, file: tf}
}

// revokeDevToken takes dev-token out of the token file and reloads it.
func (e *tokenEnv) revokeDevToken(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(e.file, []byte("other-token User:other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.v.Reload(); err != nil {
		t.Fatal(err)
	}
}

// openEvents opens the event stream with dev-token.
func (e *tokenEnv) openEvents(t *testing.T, ctx context.Context) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer dev-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("event stream: %d", resp.StatusCode)
	}
	return resp
}

// grant adds a binding and waits for the gateway's metadata to hold it.
func grant(t *testing.T, ctx context.Context, c *client.Client, b acl.Binding) {
	t.Helper()
	if res, err := c.CreateAcls(ctx, []acl.Binding{b}); err != nil || res[0] != nil {
		t.Fatal(res, err)
	}
	if _, err := c.WaitMetadata(ctx, func(m *metadata.Image) bool { return m.HasAcl(b) }); err != nil {
		t.Fatal(err)
	}
}
