//go:build integration

package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A storage node refuses a value of --log-cache-window it cannot use, with
// exit status 2 and a message naming the flag, before it touches its data
// directory.
func TestStorageRefusesBadCacheWindow(t *testing.T) {
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "storage")
	for _, tc := range []struct{ value, want string }{
		{"-1", "--log-cache-window -1: want a number of bytes, or 0"},
		{"lots", `invalid value "lots" for flag -log-cache-window`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "skein-storage"), "--data-dir", dataDir, "--log-cache-window", tc.value)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Fatalf("--log-cache-window %s: %v, want exit status 2; output:\n%s", tc.value, err, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("--log-cache-window %s said:\n%s\nwant it to say %q", tc.value, out, tc.want)
		}
	}
	if matches, _ := filepath.Glob(dataDir + "*"); len(matches) != 0 {
		t.Errorf("a refused start left %v behind", matches)
	}
}
