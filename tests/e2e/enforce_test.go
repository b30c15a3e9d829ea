//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/gen/skein/controller/v1/controllerv1grpc"
	groupv1 "skein/gen/skein/group/v1"
	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/client"
	"skein/libs/errs"
	md "skein/libs/metadata"
	"skein/libs/rpcerr"
	"skein/libs/tlsconf"
)

// checkEnforcement runs against a `skein dev --secure` cluster whose topic
// "secure" exists: ACLs bind where the operation happens, not only at the
// gateway. User:alice, a client certificate `skein certs` issues from the
// cluster's CA, calls the storage nodes, a group coordinator and the
// controllers directly and through the gateway: without ACLs every call is
// refused with its authorization code, and a client certificate may not
// replicate from a storage node nor register as a broker. After `skein acl
// add` (the super user's client certificate), the same calls succeed.
func checkEnforcement(t *testing.T, bin string, d *Dev, sec *secureFiles) {
	t.Helper()
	caDir := filepath.Dir(sec.CA)
	skein := func(args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, filepath.Join(bin, "skein"), args...).CombinedOutput()
		return string(out), err
	}
	if out, err := skein("certs", "--dir", caDir, "--name", "alice"); err != nil {
		t.Fatalf("skein certs --name alice: %v\n%s", err, out)
	}
	alice, err := tlsconf.ClientConfigFiles(sec.CA, filepath.Join(caDir, "alice.crt"), filepath.Join(caDir, "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	procs, err := d.Processes()
	if err != nil {
		t.Fatal(err)
	}
	// The operations endpoints: alice's certificate is of the CA, but the
	// metrics (every topic and group name) and profiles are for the
	// cluster's services and principals with describe on the cluster;
	// the health checks answer her.
	superTLS, err := tlsconf.ClientConfigFiles(sec.CA, sec.ClientCert, sec.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	get := func(cfg *tls.Config, url string) int {
		t.Helper()
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range procs {
		if p.Role == "gateway" || p.HTTPAddr == "" {
			continue
		}
		base := "https://" + p.HTTPAddr
		for path, want := range map[string]int{"/metrics": http.StatusForbidden, "/debug/pprof/cmdline": http.StatusForbidden, "/healthz": http.StatusOK} {
			if got := get(alice, base+path); got != want {
				t.Errorf("%s-%d %s with alice's certificate: %d, want %d", p.Role, p.ID, path, got, want)
			}
		}
		if got := get(superTLS, base+"/metrics"); got != http.StatusOK {
			t.Errorf("%s-%d /metrics with the super user's certificate: %d, want 200", p.Role, p.ID, got)
		}
	}
	var ctrls, storages []string
	for _, p := range procs {
		switch p.Role {
		case "controller":
			ctrls = append(ctrls, p.GRPCAddr)
		case "storage":
			storages = append(storages, p.GRPCAddr)
		}
	}
	cl, err := client.New(client.Config{Controllers: ctrls, DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(alice))}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.WaitReady(ctx); err != nil {
		t.Fatalf("alice's client never had metadata: %v", err)
	}

	// Alice's direct calls: each answers its own error (nil: served).
	produce := func() error {
		res, err := cl.ProduceBatch(ctx, "secure", 0, client.AcksAll, client.BatchIdentity{ProducerID: -1}, []client.Record{{Topic: "secure", Value: []byte("alice, direct")}})
		if err != nil {
			return err
		}
		return res[0].Err
	}
	fetch := func() error {
		_, err := cl.Fetch(ctx, client.FetchRequest{Topic: "secure", Partition: 0, Offset: 0})
		return err
	}
	join := func() error {
		resp, err := cl.Groups().Heartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "alice-group", MemberEpoch: 0,
			RebalanceTimeoutMs: 5000, SessionTimeoutMs: 10000, SubscribedTopics: []string{"secure"}})
		if err == nil {
			cl.Groups().Heartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{GroupId: "alice-group", MemberId: resp.GetMemberId(), MemberEpoch: -1})
		}
		return err
	}
	create := func() error {
		_, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "alice-direct", Partitions: 1, ReplicationFactor: 3})
		return err
	}
	// A client's metadata holds only the topics it may describe (as
	// Kafka's Metadata answers): alice's has no "secure", and her client
	// refuses to write there without asking a storage node.
	if m := cl.Metadata(); !m.Filtered() || m.PartitionCount("secure") != 0 || len(m.Topics()) != 0 {
		t.Errorf("alice's metadata: filtered %v, %d topics, %d partitions of secure; want a filtered view with no topic", m.Filtered(), len(m.Topics()), m.PartitionCount("secure"))
	}
	if err := produce(); errs.Of(err) != errs.TopicAuthorizationFailed || !strings.Contains(err.Error(), "not in this client's metadata") {
		t.Errorf("alice's produce to a topic she may not describe: %v, want TOPIC_AUTHORIZATION_FAILED from her client", err)
	}
	// With describe alone she sees it, and each service refuses the rest.
	gw := []string{"--gateway", d.GRPCAddr, "--tls-ca", sec.CA}
	super := append(gw, "--tls-cert", sec.ClientCert, "--tls-key", sec.ClientKey)
	if out, err := skein(append([]string{"acl", "add", "--principal", "User:alice", "--topic", "secure", "--operation", "describe"}, super...)...); err != nil {
		t.Fatalf("skein acl add describe: %v\n%s", err, out)
	}
	if _, err := cl.WaitMetadata(ctx, func(m *md.Image) bool { return m.PartitionCount("secure") > 0 }); err != nil {
		t.Fatalf("alice's metadata never showed secure after describe: %v", err)
	}
	direct := []struct {
		name string
		call func() error
		row  *errs.Error
	}{
		{"produce to a storage node", produce, errs.TopicAuthorizationFailed},
		{"fetch from a storage node", fetch, errs.TopicAuthorizationFailed},
		{"join a group at its coordinator", join, errs.GroupAuthorizationFailed},
		{"create a topic at the controller", create, errs.TopicAuthorizationFailed},
	}
	for _, c := range direct {
		if err := c.call(); errs.Of(err) != c.row || !strings.Contains(err.Error(), "User:alice") {
			t.Errorf("alice without ACLs: %s: %v, want %s naming User:alice", c.name, err, c.row.Name)
		}
	}

	// What only the cluster's own services may call.
	cc, err := grpc.NewClient(storages[0], grpc.WithTransportCredentials(credentials.NewTLS(alice)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rs, err := storagev1.NewStorageServiceClient(cc).Replicate(ctx)
	if err == nil {
		_ = rs.Send(&storagev1.ReplicateRequest{ReplicaId: 9, MaxWaitMs: 10})
		_, err = rs.Recv()
	}
	if status.Code(err) != codes.PermissionDenied || errs.Of(rpcerr.FromStatus(err)) != errs.ClusterAuthorizationFailed {
		t.Errorf("alice opening a Replicate stream: %v, want PERMISSION_DENIED CLUSTER_AUTHORIZATION_FAILED", err)
	}
	ccCtrl, err := grpc.NewClient(ctrls[0], grpc.WithTransportCredentials(credentials.NewTLS(alice)))
	if err != nil {
		t.Fatal(err)
	}
	defer ccCtrl.Close()
	_, err = controllerv1grpc.NewControllerServiceClient(ccCtrl).RegisterBroker(ctx, &controllerv1.RegisterBrokerRequest{BrokerId: 9, GrpcAddr: "127.0.0.1:1", IncarnationId: "alice"})
	if status.Code(err) != codes.PermissionDenied || errs.Of(rpcerr.FromStatus(err)) != errs.ClusterAuthorizationFailed {
		t.Errorf("alice registering as broker 9: %v, want PERMISSION_DENIED CLUSTER_AUTHORIZATION_FAILED", err)
	}

	// Through the gateway, alice's certificate is her principal too.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: alice}}
	rest := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, d.BaseURL+path, rd)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	viaGateway := []struct {
		method, path string
		body         any
		row          string
	}{
		{"POST", "/v1/topics/secure/partitions/0/records", map[string]any{"records": []map[string]any{{"value": "alice, via the gateway"}}}, "TOPIC_AUTHORIZATION_FAILED"},
		{"GET", "/v1/topics/secure/partitions/0/records?offset=0", nil, "TOPIC_AUTHORIZATION_FAILED"},
		{"POST", "/v1/groups/alice-group/members", map[string]any{"topics": []string{"secure"}}, "GROUP_AUTHORIZATION_FAILED"},
		{"POST", "/v1/topics", map[string]any{"name": "alice-rest", "partitions": 1, "replication_factor": 3}, "TOPIC_AUTHORIZATION_FAILED"},
	}
	for _, c := range viaGateway {
		if code, out := rest(c.method, c.path, c.body); code != http.StatusForbidden || out["error_code"] != c.row {
			t.Errorf("alice via the gateway without ACLs: %s %s: %d %v, want 403 %s", c.method, c.path, code, out, c.row)
		}
	}

	// The CLI: the dev token's User:dev may not list ACLs (--token is
	// checked, then refused by the authorizer); the super user's client
	// certificate grants alice what she needs.
	if out, err := skein(append([]string{"acl", "list", "--token", sec.DevToken}, gw...)...); err == nil || !strings.Contains(out, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Errorf("skein acl list --token (User:dev): %v\n%s", err, out)
	}
	if out, err := skein(append([]string{"acl", "list", "--token", "not-a-token"}, gw...)...); err == nil || !strings.Contains(out, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("skein acl list with an unknown token: %v\n%s", err, out)
	}
	for _, add := range [][]string{
		{"--topic", "secure", "--operation", "read,write"},
		{"--topic", "alice-", "--pattern", "prefixed", "--operation", "create"},
		{"--group", "alice-group", "--operation", "read"},
	} {
		args := append(append([]string{"acl", "add", "--principal", "User:alice"}, add...), super...)
		if out, err := skein(args...); err != nil {
			t.Fatalf("skein %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := skein(append([]string{"acl", "add", "--principal", "User:alice", "--topic", "secure", "--operation", "obliterate"}, super...)...); err == nil || !strings.Contains(out, `unknown operation "obliterate"`) {
		t.Errorf("skein acl add with an unknown operation: %v\n%s", err, out)
	}
	out, err := skein(append([]string{"acl", "list", "--principal", "User:alice"}, super...)...)
	if err != nil || strings.Count(out, "User:alice") != 5 {
		t.Errorf("skein acl list --principal User:alice: %v, want 5 bindings:\n%s", err, out)
	}

	// Now alice's calls are served, directly and through the gateway, once
	// each service's metadata has the bindings.
	for _, c := range direct {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := c.call()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("alice with ACLs: %s: %v", c.name, err)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, c := range viaGateway {
		if c.method == "POST" && c.path == "/v1/topics" {
			c.body = map[string]any{"name": "alice-rest", "partitions": 1, "replication_factor": 3}
		}
		if code, out := rest(c.method, c.path, c.body); code != http.StatusOK {
			t.Errorf("alice via the gateway with ACLs: %s %s: %d %v", c.method, c.path, code, out)
		} else if strings.HasPrefix(c.path, "/v1/groups/") {
			rest("DELETE", "/v1/groups/alice-group/members/"+fmt.Sprint(out["member_id"]), nil)
		}
	}
	// What alice wrote directly is there.
	res, err := cl.Fetch(ctx, client.FetchRequest{Topic: "secure", Partition: 0, Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, r := range res.Records {
		values = append(values, string(r.Value))
	}
	if !strings.Contains(strings.Join(values, "|"), "alice, direct") {
		t.Errorf("alice's direct write is not in secure-0: %q", values)
	}

	// Audit lines where the refusals happened.
	logHas := func(name string, parts ...string) bool {
		b, _ := os.ReadFile(filepath.Join(d.Dir, "logs", name+".log"))
		for _, line := range strings.Split(string(b), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return true
			}
		}
		return false
	}
	found := false
	for _, p := range procs {
		if p.Role == "storage" && logHas(fmt.Sprintf("storage-%d", p.ID), `"msg":"call denied"`, `"principal":"User:alice"`, `"resource":"topic:secure"`, `"acl_operation":`, `"error_code":"TOPIC_AUTHORIZATION_FAILED"`) {
			found = true
		}
	}
	if !found {
		t.Error("no storage node logged alice's refused produce or fetch")
	}
	if !logHas("controller-1", `"msg":"call denied"`, `"principal":"User:alice"`, `RegisterBroker`, `CLUSTER_AUTHORIZATION_FAILED`) &&
		!logHas("controller-2", `"msg":"call denied"`, `"principal":"User:alice"`, `RegisterBroker`) &&
		!logHas("controller-3", `"msg":"call denied"`, `"principal":"User:alice"`, `RegisterBroker`) {
		t.Error("no controller logged alice's refused RegisterBroker")
	}
}
