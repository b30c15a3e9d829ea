//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "skein/gen/skein/v1" // registers skein.v1 for the grpcurl examples
)

// The README's quickstart addresses: what `make run` gives the gateway.
const (
	readmeREST = "http://localhost:8080"
	readmeGRPC = "localhost:9090"
	curlPath   = "/usr/bin/curl"
)

// readmeBlock answers the commands of the fenced sh block that follows the
// marker line in the README: comments and blank lines dropped, lines ending
// in a backslash joined.
func readmeBlock(t *testing.T, readme, marker string) []string {
	t.Helper()
	lines := strings.Split(readme, "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) != marker {
		i++
	}
	if i == len(lines) {
		t.Fatalf("README.md has no %s line", marker)
	}
	for i++; i < len(lines) && strings.TrimSpace(lines[i]) == ""; i++ {
	}
	if i == len(lines) || strings.TrimSpace(lines[i]) != "```sh" {
		t.Fatalf("README.md: %s is not followed by a ```sh block", marker)
	}
	var cmds []string
	cur := ""
	for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		l := strings.TrimSpace(lines[i])
		if cur == "" && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if strings.HasSuffix(l, `\`) {
			cur += strings.TrimSuffix(l, `\`) + " "
			continue
		}
		cmds = append(cmds, cur+l)
		cur = ""
	}
	if i == len(lines) {
		t.Fatalf("README.md: the block after %s is not closed", marker)
	}
	if len(cmds) == 0 {
		t.Fatalf("README.md: the block after %s holds no commands", marker)
	}
	return cmds
}

// shellWords splits a command line as sh does for the simple commands of
// the README: words, with '...' and "..." quoting.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; ch {
		case ' ', '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\'', '"':
			j := strings.IndexByte(line[i+1:], ch)
			if j < 0 {
				return nil, fmt.Errorf("unclosed %c in %s", ch, line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

var fetchPath = regexp.MustCompile(`/v1/topics/[^/]+/partitions/(\d+)/records`)

// TestQuickstart is a newcomer's path: the README says `make run` (which is
// `bin/skein dev`, the gateway on localhost:8080 and :9090), then gives curl
// commands. Each runs as printed with /usr/bin/curl — only localhost:8080
// becomes the test cluster's gateway, and --write-out is added to read the
// status — and must exit 0 with a 2xx JSON answer. Then the gRPC examples:
// grpcurl's when grpcurl is installed (else the same request through the Go
// gRPC client: grpcurl is optional), and the skein command line's.
func TestQuickstart(t *testing.T) {
	if _, err := os.Stat(curlPath); err != nil {
		t.Fatalf("%s is missing (%v): the quickstart test runs the README's curl commands as a reader would; install curl (apt-get install curl)", curlPath, err)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	checkRunCommand(t, root, readme)
	curls := readmeBlock(t, readme, "<!-- quickstart -->")
	grpcs := readmeBlock(t, readme, "<!-- quickstart-grpc -->")

	d := devCluster(t)
	ctx := testCtx(t, 60*time.Second)
	producedTo := map[string]bool{} // partitions the produce commands wrote to
	for _, cmd := range curls {
		words, err := shellWords(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if len(words) < 2 || words[0] != "curl" {
			t.Fatalf("quickstart command %q is not a curl command", cmd)
		}
		for _, w := range words {
			if w == "|" || w == ";" || w == "&&" || strings.HasPrefix(w, ">") {
				t.Fatalf("quickstart command %q is not one simple curl command", cmd)
			}
		}
		if !strings.Contains(cmd, readmeREST+"/") {
			t.Fatalf("quickstart command %q does not address %s", cmd, readmeREST)
		}
		line := curlPath + strings.TrimPrefix(strings.ReplaceAll(cmd, readmeREST, d.BaseURL), "curl") + ` --write-out '\n%{http_code}'`
		run := exec.CommandContext(ctx, "/bin/sh", "-c", line)
		var stderr bytes.Buffer
		run.Stderr = &stderr
		out, err := run.Output()
		if err != nil {
			t.Fatalf("%s\nexited with %v: %s%s", cmd, err, out, stderr.String())
		}
		nl := bytes.LastIndexByte(out, '\n')
		if nl < 0 {
			t.Fatalf("%s\nanswered %q", cmd, out)
		}
		body, status := out[:nl], string(out[nl+1:])
		t.Logf("$ %s\n%s %s", cmd, status, body)
		if code, err := strconv.Atoi(status); err != nil || code < 200 || code > 299 {
			t.Fatalf("%s\nanswered HTTP %s: %s", cmd, status, body)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s\nanswered something that is not a JSON object (%v): %s", cmd, err, body)
		}
		if _, isErr := doc["error_code"]; isErr {
			t.Fatalf("%s\nanswered an error: %s", cmd, body)
		}
		if results, ok := doc["results"]; ok {
			var rs []ProduceResult
			if err := json.Unmarshal(results, &rs); err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.ErrorCode != "NONE" {
					t.Fatalf("%s\nrefused a record: %s", cmd, body)
				}
				producedTo[strconv.Itoa(int(r.Partition))] = true
			}
		}
		// A consume command reads what the produce commands wrote: the
		// README names the partition the key lands on.
		if m := fetchPath.FindStringSubmatch(cmd); m != nil {
			var fr FetchResponse
			if err := json.Unmarshal(body, &fr); err != nil {
				t.Fatal(err)
			}
			if !producedTo[m[1]] || len(fr.Records) == 0 {
				t.Errorf("%s\nreads partition %s, which holds %d records; the README's records went to %v", cmd, m[1], len(fr.Records), producedTo)
			}
		}
	}

	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range grpcs {
		switch {
		case strings.HasPrefix(cmd, "grpcurl "):
			runGrpcurlExample(ctx, t, d, cmd)
		case strings.Contains(cmd, "bin/skein "):
			// The command line finds the gateway at localhost:9090 by default;
			// SKEIN_GATEWAY (its documented twin) points it at this cluster.
			run := exec.CommandContext(ctx, "/bin/sh", "-c", strings.ReplaceAll(cmd, "bin/skein ", filepath.Join(bin, "skein")+" "))
			run.Dir = root
			run.Env = append(os.Environ(), "SKEIN_GATEWAY="+d.GRPCAddr)
			out, err := run.CombinedOutput()
			t.Logf("$ %s\n%s", cmd, out)
			if err != nil {
				t.Fatalf("%s\nexited with %v: %s", cmd, err, out)
			}
			if strings.Contains(cmd, " consume ") && len(bytes.TrimSpace(out)) == 0 {
				t.Errorf("%s\nprinted nothing", cmd)
			}
		default:
			t.Fatalf("the README's gRPC block has %q, neither grpcurl nor bin/skein", cmd)
		}
	}
}

// checkRunCommand: the README's run command is `make run`, whose recipe is
// `bin/skein dev`, whose gateway defaults to the README's addresses.
func checkRunCommand(t *testing.T, root, readme string) {
	t.Helper()
	if !strings.Contains(readme, "make run") {
		t.Error("the README does not say `make run`")
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^run:.*\n\t(.*)$`).FindSubmatch(mk)
	if recipe == nil || !strings.HasPrefix(string(recipe[1]), "bin/skein dev ") {
		t.Errorf("the Makefile's run target does not run bin/skein dev: %q", recipe)
	}
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	help, _ := exec.Command(filepath.Join(bin, "skein"), "dev", "--help").CombinedOutput()
	for _, def := range []string{`-gateway-http-addr string`, `(default "127.0.0.1:8080")`, `-gateway-grpc-addr string`, `(default "127.0.0.1:9090")`} {
		if !strings.Contains(string(help), def) {
			t.Errorf("skein dev --help lacks %s; the README's addresses are not what make run gives:\n%s", def, help)
		}
	}
}

// runGrpcurlExample runs a grpcurl line of the README: with grpcurl when it
// is installed, else the same method and JSON request through the Go gRPC
// client, so the example is checked either way.
func runGrpcurlExample(ctx context.Context, t *testing.T, d *Dev, cmd string) {
	t.Helper()
	if !strings.Contains(cmd, " "+readmeGRPC+" ") {
		t.Fatalf("%s\ndoes not address %s", cmd, readmeGRPC)
	}
	if _, err := exec.LookPath("grpcurl"); err == nil {
		out, err := exec.CommandContext(ctx, "/bin/sh", "-c", strings.ReplaceAll(cmd, " "+readmeGRPC+" ", " "+d.GRPCAddr+" ")).CombinedOutput()
		t.Logf("$ %s\n%s", cmd, out)
		if err != nil || !json.Valid(out) {
			t.Fatalf("%s\nexited with %v: %s", cmd, err, out)
		}
		return
	}
	words, err := shellWords(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var body, method string
	for i, w := range words {
		if w == "-d" && i+1 < len(words) {
			body = words[i+1]
		}
	}
	method = words[len(words)-1]
	svc, name, ok := strings.Cut(method, "/")
	if body == "" || !ok {
		t.Fatalf("%s\nhas no -d body or no service/method", cmd)
	}
	desc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		t.Fatalf("%s\nnames service %s: %v", cmd, svc, err)
	}
	sd, ok := desc.(protoreflect.ServiceDescriptor)
	if !ok || sd.Methods().ByName(protoreflect.Name(name)) == nil {
		t.Fatalf("%s\nnames no method of skein.v1: %s", cmd, method)
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	inType, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		t.Fatal(err)
	}
	outType, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		t.Fatal(err)
	}
	in, out := inType.New().Interface(), outType.New().Interface()
	if err := protojson.Unmarshal([]byte(body), in); err != nil {
		t.Fatalf("%s\nhas a request grpcurl would refuse: %v", cmd, err)
	}
	if err := grpcConn(t, d).Invoke(ctx, "/"+method, in, out); err != nil {
		t.Fatalf("%s\nfailed: %v", cmd, err)
	}
	t.Logf("$ %s   (grpcurl is not installed: sent through the Go gRPC client)\n%s", cmd, protojson.Format(out))
}
