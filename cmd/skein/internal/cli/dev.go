package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"skein/cmd/skein/internal/devcluster"
	"skein/libs/procenv"
	"skein/libs/telemetry"
)

func devCmd(ctx context.Context, args []string, io IO) error {
	f := newFlags("dev", io, false)
	dataDir := f.String("data-dir", "skein-dev", "directory for cluster.json, logs and every node's data")
	nodes := f.Int("storage-nodes", 3, "number of storage nodes")
	binDir := f.String("bin-dir", "", "directory holding skein-controller, skein-storage, skein-groupcoord, skein-txncoord and skein-gateway (default: the skein binary's)")
	logLevel := f.String("log-level", "info", "log level of every process")
	gwHTTP := f.String("gateway-http-addr", "127.0.0.1:8080", "the gateway's REST address (empty: a free port)")
	gwGRPC := f.String("gateway-grpc-addr", "127.0.0.1:9090", "the gateway's gRPC address (empty: a free port)")
	secure := f.Bool("secure", false, "mutual TLS on every hop and encrypted gossip: a CA, certificates, a gossip key and a token file with a dev token are created in <data-dir>/tls; clients need the CA (curl --cacert, skein --tls-ca) and the client certificate or the dev token: the gateway requires a principal and authorizes it with ACLs (the client certificate's User:client is a super user, the dev token's User:dev has no ACLs at first)")
	gomaxprocs := f.Int("gomaxprocs", 0, "GOMAXPROCS of every process: 0 divides this machine's CPUs among the storage nodes and the gateway (at least 1 each) unless GOMAXPROCS is set in the environment, which is then passed on; -1 leaves every process Go's default (all CPUs)")
	steadySysmon := f.Bool("steady-sysmon", true, "start every process with GODEBUG="+procenv.SteadySysmon+", unless GODEBUG in the environment sets schedtrace: the Go runtime's monitor thread then keeps its own tick instead of being woken with each burst of work, which costs context switches on every message (docs/OPERATIONS.md, \"Many processes on few cores\"); false passes GODEBUG on as it is")
	demos := f.Bool("console-demos", false, "show kill / pause / resume buttons for the storage nodes in the gateway's console (/console/)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("dev takes no arguments, got %q", pos)
	}
	if *nodes < 1 {
		return usagef("--storage-nodes %d: want 1 or more", *nodes)
	}
	if _, err := telemetry.NewLogger(io.Err, "skein", *logLevel); err != nil {
		return usagef("--log-level: %v", err)
	}
	procs, why, err := devGoMaxProcs(*gomaxprocs, os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0), *nodes)
	if err != nil {
		return err
	}
	if *binDir == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if self, err = filepath.EvalSymlinks(self); err != nil {
			return err
		}
		*binDir = filepath.Dir(self)
	}
	absDir, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	// The gateway learns its cluster's processes from cluster.json, which
	// the console's demos (only with --console-demos) act on.
	gwArgs := []string{"--dev-cluster-file", filepath.Join(absDir, "cluster.json")}
	if *demos {
		gwArgs = append(gwArgs, "--console-demos")
	}
	// A closed terminal (SIGHUP) stops the cluster too, as Ctrl-C does:
	// its processes must not outlive the command that owns them.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	fmt.Fprintf(io.Err, "starting a cluster of 3 controllers, %d storage nodes, 2 group coordinators, 2 transaction coordinators and a gateway in %s (%s)\n", *nodes, *dataDir, why)
	return devcluster.Run(ctx, devcluster.Options{
		DataDir: *dataDir, StorageNodes: *nodes, BinDir: *binDir, LogLevel: *logLevel, Progress: io.Err, GoMaxProcs: procs, SteadySysmon: *steadySysmon,
		GatewayHTTPAddr: *gwHTTP, GatewayGRPCAddr: *gwGRPC, GatewayArgs: gwArgs, Secure: *secure,
	}, func(c *devcluster.Cluster) {
		gw := c.Gateway()
		if sec := c.Security(); sec != nil {
			fmt.Fprintf(io.Out, `
Skein is running. Secured: mutual TLS between every process, gossip encrypted,
every API call authenticated (the client certificate or the dev token) and
authorized by ACLs (the client certificate's principal is a super user).
  REST:    https://%[1]s   (console: https://%[1]s/console/)
  gRPC:    %[2]s   (TLS)
  CA:      %[3]s
  client:  %[4]s, %[5]s   (principal %[10]s, super user)
  token:   %[7]s   (principal %[8]s, allowed only what ACLs grant it; in %[9]s)
  cluster: %[6]s

Try:
  curl -s --cacert %[3]s --cert %[4]s --key %[5]s -X POST https://%[1]s/v1/topics -d '{"name": "orders", "partitions": 3}'
  echo hello | skein produce orders --gateway %[2]s --tls-ca %[3]s --tls-cert %[4]s --tls-key %[5]s
  curl -s --cacert %[3]s -H 'Authorization: Bearer %[7]s' 'https://%[1]s/v1/topics/orders/partitions/0/records?offset=0'   # 403
  skein acl add --principal %[8]s --topic orders --operation read --gateway %[2]s --tls-ca %[3]s --tls-cert %[4]s --tls-key %[5]s

Ctrl-C stops the cluster; run skein dev --secure again with the same --data-dir to restart it.
`, gw.HTTPAddr, gw.GRPCAddr, sec.CA, sec.ClientCert, sec.ClientKey, filepath.Join(*dataDir, "cluster.json"),
				sec.DevToken, devcluster.DevPrincipal, sec.TokenFile, devcluster.ClientPrincipal)
			return
		}
		rest := "http://" + gw.HTTPAddr
		fmt.Fprintf(io.Out, `
Skein is running.
  REST:    %[1]s   (OpenAPI: %[1]s/openapi.json)
  console: %[1]s/console/
  gRPC:    %[2]s   (server reflection on)
  cluster: %[3]s
  logs:    %[4]s

Try:
  curl -s -X POST %[1]s/v1/topics -d '{"name": "orders", "partitions": 3, "replication_factor": 3}'
  curl -s -X POST %[1]s/v1/topics/orders/records -d '{"records": [{"key": "user-1", "value": "hello"}]}'
  curl -s '%[1]s/v1/topics/orders/partitions/2/records?offset=0'   # key user-1 lands on partition 2 of 3
  curl -s %[1]s/v1/topics/orders
  echo hello | skein produce orders --gateway %[2]s
  skein consume orders --gateway %[2]s

Ctrl-C stops the cluster; run skein dev again with the same --data-dir to restart it.
`, rest, gw.GRPCAddr, filepath.Join(*dataDir, "cluster.json"), filepath.Join(*dataDir, "logs"))
	})
}

// devGoMaxProcs resolves --gomaxprocs into the GOMAXPROCS the cluster's
// processes are given (0: none, each keeps what it inherits) and a phrase
// for the start-up line. cpus is what this process may use; env is
// GOMAXPROCS from the environment.
func devGoMaxProcs(flag int, env string, cpus, storageNodes int) (int, string, error) {
	switch {
	case flag < -1:
		return 0, "", usagef("--gomaxprocs %d: want a positive number, 0 (a share of the CPUs) or -1 (Go's default)", flag)
	case flag > 0:
		return flag, fmt.Sprintf("GOMAXPROCS=%d each, as --gomaxprocs asks", flag), nil
	case flag == -1:
		return 0, "GOMAXPROCS: each process's own default", nil
	case env != "":
		return 0, fmt.Sprintf("GOMAXPROCS=%s each, from the environment", env), nil
	}
	n := devcluster.SharedGoMaxProcs(cpus, storageNodes)
	return n, fmt.Sprintf("GOMAXPROCS=%d each: %d CPUs shared by %d storage nodes and the gateway", n, cpus, storageNodes), nil
}
