package authn

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skein/libs/errs"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func sign(t *testing.T, claims map[string]any, k []byte) string {
	t.Helper()
	tok, err := SignJWT(claims, k)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// signHeader signs claims with key under a header given as JSON, for
// headers SignJWT does not make.
func signHeader(t *testing.T, header string, claims map[string]any, k []byte) string {
	t.Helper()
	body, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signed := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString(body)
	mac := hmac.New(sha256.New, k)
	mac.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// signRaw signs claims given as JSON text (duplicate names, case
// variants) under the plain HS256 header.
func signRaw(t *testing.T, claims string, k []byte) string {
	t.Helper()
	signed := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	mac := hmac.New(sha256.New, k)
	mac.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func TestVerifyJWT(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	exp := fmt.Sprint(now.Unix() + 60)
	hs384 := "eyJhbGciOiJIUzM4NCJ9." + strings.Split(sign(t, map[string]any{"sub": "x"}, key), ".")[1] + ".AAAA"
	none := "eyJhbGciOiJub25lIn0." + strings.Split(sign(t, map[string]any{"sub": "x"}, key), ".")[1] + "."
	valid := map[string]any{"sub": "alice", "exp": now.Unix() + 60}
	for _, tc := range []struct {
		name, tok, want, errHas string
	}{
		{"good", sign(t, map[string]any{"sub": "alice", "exp": now.Unix() + 60}, key), "User:alice", ""},
		// A subject is always a User's name, whatever it holds: a token
		// cannot name the super user User:client, nor a principal of
		// another type.
		{"subject naming a user", sign(t, map[string]any{"sub": "User:client", "exp": now.Unix() + 60}, key), "User:User:client", ""},
		{"subject naming a group", sign(t, map[string]any{"sub": "Group:ops", "exp": now.Unix() + 60}, key), "User:Group:ops", ""},
		{"subject with a lower-case type", sign(t, map[string]any{"sub": "user:zed", "exp": now.Unix() + 60}, key), "User:user:zed", ""},
		{"nbf passed", sign(t, map[string]any{"sub": "alice", "exp": now.Unix() + 60, "nbf": now.Unix() - 1}, key), "User:alice", ""},
		{"plain header", signHeader(t, `{"alg":"HS256"}`, valid, key), "User:alice", ""},
		{"expired", sign(t, map[string]any{"sub": "alice", "exp": now.Unix() - 1}, key), "", "expired at"},
		{"expires now", sign(t, map[string]any{"sub": "alice", "exp": now.Unix()}, key), "", "expired at"},
		{"not yet valid", sign(t, map[string]any{"sub": "alice", "exp": now.Unix() + 120, "nbf": now.Unix() + 60}, key), "", "not valid before"},
		{"bad signature", sign(t, map[string]any{"sub": "alice"}, []byte("another key of sixteen bytes")), "", "bad signature"},
		{"no subject", sign(t, map[string]any{"exp": now.Unix() + 60}, key), "", "no sub claim"},
		{"no expiry", sign(t, map[string]any{"sub": "alice"}, key), "", "no exp claim"},
		{"null expiry", sign(t, map[string]any{"sub": "alice", "exp": nil}, key), "", "no exp claim"},
		{"no expiry, nbf passed", sign(t, map[string]any{"sub": "alice", "nbf": now.Unix() - 1}, key), "", "no exp claim"},
		// The verifier understands no header extensions, so a header that
		// marks any as critical is refused, whatever it lists.
		{"critical extension", signHeader(t, `{"alg":"HS256","crit":["exp"],"exp":1}`, valid, key), "", `"crit" is not accepted`},
		{"critical unknown extension", signHeader(t, `{"alg":"HS256","typ":"JWT","crit":["x-skein"],"x-skein":true}`, valid, key), "", `"crit" is not accepted`},
		{"empty crit", signHeader(t, `{"alg":"HS256","crit":[]}`, valid, key), "", `"crit" is not accepted`},
		{"null crit", signHeader(t, `{"alg":"HS256","crit":null}`, valid, key), "", `"crit" is not accepted`},
		// Claims are read by their exact names, and one named twice is
		// refused: neither a case variant nor a later duplicate picks the
		// principal or the expiry.
		{"sub named twice", signRaw(t, `{"sub":"alice","exp":`+exp+`,"sub":"admin"}`, key), "", `claim "sub" is named twice`},
		{"exp named twice", signRaw(t, `{"sub":"alice","exp":1,"exp":`+exp+`}`, key), "", `claim "exp" is named twice`},
		{"a case variant of sub", signRaw(t, `{"sub":"alice","Sub":"admin","exp":`+exp+`}`, key), "User:alice", ""},
		{"exp only in capitals", signRaw(t, `{"sub":"alice","EXP":`+exp+`}`, key), "", "no exp claim"},
		{"claims not an object", signRaw(t, `["alice"]`, key), "", "malformed claims"},
		{"claims with data after them", signRaw(t, `{"sub":"alice","exp":`+exp+`} {}`, key), "", "malformed claims"},
		// A subject names one user, in text a log line and an ACL can
		// hold: not the wildcard, no control characters; any other
		// Unicode is a name.
		{"wildcard subject", sign(t, map[string]any{"sub": "*", "exp": now.Unix() + 60}, key), "", "the wildcard that names every user"},
		{"subject with a newline", sign(t, map[string]any{"sub": "alice\nUser:admin", "exp": now.Unix() + 60}, key), "", "control character"},
		{"subject not ASCII", sign(t, map[string]any{"sub": "josé", "exp": now.Unix() + 60}, key), "User:josé", ""},
		{"two parts", "abc.def", "", "malformed"},
		{"not base64", "a!b.c.d", "", "not base64url"},
		{"other algorithm", hs384, "", `"HS384" is not accepted`},
		{"alg none", none, "", `"none" is not accepted`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := VerifyJWT(tc.tok, key, now)
			if tc.errHas == "" {
				if err != nil || string(p) != tc.want {
					t.Fatalf("got %q, %v; want %q", p, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("got %q, %v; want an error with %q", p, err, tc.errHas)
			}
			if !errors.Is(err, errs.SaslAuthenticationFailed) {
				t.Fatalf("%v is not SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}

func TestParseTokenFile(t *testing.T) {
	// The operator names each token's principal: a User, typed or not.
	got, err := ParseTokenFile([]byte("# dev tokens\n\ns3cret User:alice\n  other bob  \n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["s3cret"] != "User:alice" || got["other"] != "User:bob" {
		t.Fatalf("got %v", got)
	}
	// Another type could be granted nothing (ACLs bind Users), and User:*
	// names everyone, not a caller.
	for _, bad := range []string{"lonely\n", "a b c\n", "t User:a\nt User:b\n", "svc Service:billing\n", "g Group:ops\n",
		"w User:*\n", "e User:\n", "l user:alice\n"} {
		if _, err := ParseTokenFile([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestBearer(t *testing.T) {
	for _, tc := range []struct {
		in, tok string
		ok, err bool
	}{
		{"", "", false, false},
		{"Bearer abc", "abc", true, false},
		{"bearer  abc ", "abc", true, false},
		{"Basic dXNlcjpwdw==", "", false, true},
		{"Bearer", "", false, true},
		{"Bearer   ", "", false, true},
	} {
		tok, ok, err := Bearer(tc.in)
		if tok != tc.tok || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("Bearer(%q) = %q, %v, %v", tc.in, tok, ok, err)
		}
	}
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifier(t *testing.T) {
	dir := t.TempDir()
	tf := writeFile(t, dir, "tokens", "dev-token User:dev\n")
	kf := writeFile(t, dir, "jwt.key", string(key)+"\n")
	v, err := NewVerifier(Config{TokenFile: tf, JWTKeyFile: kf})
	if err != nil {
		t.Fatal(err)
	}
	v.now = func() time.Time { return time.Unix(1_800_000_000, 0) }
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "client"}}
	for _, tc := range []struct {
		name   string
		c      Credentials
		want   Principal
		errHas string
	}{
		{"nothing", Credentials{}, "", ""},
		{"certificate", Credentials{Cert: cert}, "User:client", ""},
		{"static token", Credentials{Authorization: "Bearer dev-token"}, "User:dev", ""},
		{"token wins over certificate", Credentials{Cert: cert, Authorization: "Bearer dev-token"}, "User:dev", ""},
		{"jwt", Credentials{Authorization: "Bearer " + sign(t, map[string]any{"sub": "carol", "exp": 1_800_000_100}, key)}, "User:carol", ""},
		{"expired jwt", Credentials{Authorization: "Bearer " + sign(t, map[string]any{"sub": "carol", "exp": 1_700_000_000}, key)}, "", "expired"},
		{"jwt without exp", Credentials{Authorization: "Bearer " + sign(t, map[string]any{"sub": "carol"}, key)}, "", "no exp claim"},
		{"jwt with crit", Credentials{Authorization: "Bearer " + signHeader(t, `{"alg":"HS256","crit":["x"]}`, map[string]any{"sub": "carol", "exp": 1_800_000_100}, key)}, "", `"crit" is not accepted`},
		{"jwt naming the super user", Credentials{Authorization: "Bearer " + sign(t, map[string]any{"sub": "User:client", "exp": 1_800_000_100}, key)}, "User:User:client", ""},
		{"unknown token", Credentials{Authorization: "Bearer nope"}, "", "unknown bearer token"},
		{"bad token with a certificate", Credentials{Cert: cert, Authorization: "Bearer nope"}, "", "unknown bearer token"},
		{"other scheme", Credentials{Authorization: "Basic x"}, "", "must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := v.Authenticate(tc.c)
			if tc.errHas == "" {
				if err != nil || p != tc.want {
					t.Fatalf("got %q, %v; want %q", p, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) || !errors.Is(err, errs.SaslAuthenticationFailed) {
				t.Fatalf("got %q, %v; want SASL_AUTHENTICATION_FAILED with %q", p, err, tc.errHas)
			}
		})
	}

	// A changed token file is noticed and read again; a broken one keeps the
	// previous tokens.
	time.Sleep(10 * time.Millisecond)
	writeFile(t, dir, "tokens", "new-token User:new\n")
	if !v.Changed() {
		t.Fatal("a rewritten token file is not noticed")
	}
	if err := v.Reload(); err != nil {
		t.Fatal(err)
	}
	if p, err := v.Token("new-token"); err != nil || p != "User:new" {
		t.Fatalf("after reload: %q, %v", p, err)
	}
	if _, err := v.Token("dev-token"); err == nil {
		t.Fatal("a token removed from the file still verifies")
	}
	writeFile(t, dir, "tokens", "broken\n")
	if err := v.Reload(); err == nil {
		t.Fatal("a broken token file reloaded")
	}
	if p, err := v.Token("new-token"); err != nil || p != "User:new" {
		t.Fatalf("after a failed reload: %q, %v", p, err)
	}

	// A JWT at a gateway with tokens but no JWT key.
	tokOnly, err := NewVerifier(Config{TokenFile: filepath.Join(dir, "tokens.only")})
	if err == nil {
		t.Fatal("a token file that does not exist loaded")
	}
	writeFile(t, dir, "tokens.only", "t User:t\n")
	if tokOnly, err = NewVerifier(Config{TokenFile: filepath.Join(dir, "tokens.only")}); err != nil {
		t.Fatal(err)
	}
	if _, err := tokOnly.Token(sign(t, map[string]any{"sub": "x"}, key)); err == nil || !strings.Contains(err.Error(), "takes no JWTs") {
		t.Fatalf("a JWT without a JWT key: %v", err)
	}

	// No token source: a token is refused, saying why.
	var none *Verifier
	if _, err := none.Authenticate(Credentials{Authorization: "Bearer x"}); err == nil || !strings.Contains(err.Error(), "accepts no bearer tokens") {
		t.Fatalf("no sources: %v", err)
	}
	if p, err := none.Authenticate(Credentials{Cert: cert}); err != nil || p != "User:client" {
		t.Fatalf("no sources, a certificate: %q, %v", p, err)
	}
}

// A name a caller presents becomes the same principal whether it comes as
// a certificate's common name or a JWT's subject: User:<name>, never a
// principal whose type the caller chose.
func TestCertificateAndJWTSubjectAgree(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, name := range []string{"alice", "User:client", "user:zed", "Group:ops", "User:*", ":"} {
		fromCert := FromCertificate(&x509.Certificate{Subject: pkix.Name{CommonName: name}})
		fromJWT, err := VerifyJWT(sign(t, map[string]any{"sub": name, "exp": now.Unix() + 60}, key), key, now)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if want := Principal("User:" + name); fromCert != want || fromJWT != want {
			t.Errorf("%q: certificate %q, JWT %q; want both %q", name, fromCert, fromJWT, want)
		}
	}
}

// A certificate's common name is refused as a principal where a JWT's
// subject would be, and any other name is User:<name>.
func TestCertificateNames(t *testing.T) {
	v, err := NewVerifier(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ cn, want, errHas string }{
		{"alice", "User:alice", ""},
		{"josé", "User:josé", ""},
		{"*", "", "the wildcard that names every user"},
		{"a\tb", "", "control character"},
		{"\xff", "", "not UTF-8"},
	} {
		p, err := v.Authenticate(Credentials{Cert: &x509.Certificate{Subject: pkix.Name{CommonName: tc.cn}}})
		if tc.errHas == "" {
			if err != nil || string(p) != tc.want {
				t.Errorf("%q: %q, %v; want %q", tc.cn, p, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errHas) || !errors.Is(err, errs.SaslAuthenticationFailed) {
			t.Errorf("%q: %q, %v; want SASL_AUTHENTICATION_FAILED with %q", tc.cn, p, err, tc.errHas)
		}
	}
}
