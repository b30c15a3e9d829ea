package console

import (
	"io"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestAssetsServedWithTheirContentTypes(t *testing.T) {
	srv := newServer(t, NewHub(HubConfig{Source: &fakeSource{}}))
	for path, want := range map[string]string{
		"/console/":            "text/html; charset=utf-8",
		"/console/index.html":  "text/html; charset=utf-8",
		"/console/console.css": "text/css; charset=utf-8",
		"/console/console.js":  "text/javascript; charset=utf-8",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", path, resp.StatusCode)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != want {
			t.Errorf("%s: Content-Type %q, want %q", path, ct, want)
		}
		// No other site may frame the console (its buttons act on the
		// cluster), nor read a file as another type.
		for h, want := range map[string]string{"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'",
			"X-Content-Type-Options": "nosniff"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("%s: %s %q, want %q", path, h, got, want)
			}
		}
		if len(body) == 0 {
			t.Errorf("%s: empty", path)
		}
	}
	resp, err := http.Get(srv.URL + "/console/nope.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/console/nope.js: %d", resp.StatusCode)
	}
	// /console redirects to the page.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = client.Get(srv.URL + "/console")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Errorf("/console: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// The console works offline: no asset names a URL outside the gateway
// (no CDN, fonts or scripts from elsewhere).
func TestAssetsNameNoExternalURL(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|https?://`)
	n := 0
	err := fs.WalkDir(Assets(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		raw, err := fs.ReadFile(Assets(), path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if m := external.FindString(line); m != "" {
				t.Errorf("%s:%d names an external URL (%s): %s", path, i+1, m, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Fatalf("%d embedded files, want index.html, console.css and console.js", n)
	}
}
