// Package authn answers who a gateway caller is: the principal of a
// verified client certificate (User:<CN>), of a bearer token listed in a
// static token file, or of an HS256 JSON Web Token (User:<sub>). It knows
// nothing of gRPC or HTTP: the gateway hands it the certificate and the
// Authorization header it received.
package authn

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/tlsconf"
)

// Anonymous is the principal of a caller that presented nothing.
const Anonymous = "User:ANONYMOUS"

// Principal is a caller's identity as ACLs name it, "User:alice".
type Principal string

// FromCertificate is the principal a verified client certificate stands
// for: User:<common name>; "" when the certificate has no common name.
func FromCertificate(c *x509.Certificate) Principal {
	if c == nil || c.Subject.CommonName == "" {
		return ""
	}
	return user(c.Subject.CommonName)
}

// user is the principal of a name the caller presents (a certificate's
// common name, a JWT's subject): always User:<name>, even when the name
// looks typed, so that a caller can never choose its principal's type
// ("User:admin" as a name is User:User:admin, not the super user
// User:admin).
func user(name string) Principal { return Principal("User:" + name) }

// normalize makes a name of the token file a principal: a name without a
// type is a User. Every principal ACLs bind is a User, so another type
// ("Group:ops") is refused: a caller of it could be granted nothing of its
// own, and the wildcard User:* would still reach it. So is User:*, the
// wildcard that names everyone, as a caller's own principal.
func normalize(name string) (Principal, error) {
	typ, rest, typed := strings.Cut(name, ":")
	if !typed {
		rest = name
	} else if typ != acl.PrincipalType {
		return "", fmt.Errorf("principal %q: the principal type is %s (%s:alice, or alice)", name, acl.PrincipalType, acl.PrincipalType)
	}
	if rest == "" || rest == acl.Wildcard {
		return "", fmt.Errorf("principal %q: a caller's principal names one user", name)
	}
	return Principal(acl.PrincipalType + ":" + rest), nil
}

// Bearer answers the token of an Authorization header value. An empty
// header is no token (ok false); any other scheme, or Bearer without a
// token, is an error.
func Bearer(header string) (token string, ok bool, err error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", false, nil
	}
	scheme, tok, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false, errs.Errorf(errs.SaslAuthenticationFailed, "the Authorization header must be \"Bearer <token>\", got scheme %q", scheme)
	}
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", false, errs.Errorf(errs.SaslAuthenticationFailed, "the Authorization header has no bearer token")
	}
	return tok, true, nil
}

// ParseTokenFile reads a static token file: one "token principal" pair a
// line; blank lines and lines starting with # are skipped. A principal
// without a type ("alice") is User:alice; one of another type is refused.
func ParseTokenFile(data []byte) (map[string]Principal, error) {
	out := map[string]Principal{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want \"token principal\", got %d fields", n, len(f))
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("line %d: the token is listed twice", n)
		}
		p, err := normalize(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		out[f[0]] = p
	}
	return out, sc.Err()
}

// jwtHeader and jwtClaims are the parts of a JWT the gateway reads.
type jwtHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	// Crit lists header extensions the verifier must understand or refuse
	// the token; it understands none, so a header that has it is refused.
	Crit json.RawMessage `json:"crit"`
}

type jwtClaims struct {
	Sub string   `json:"sub"`
	Exp *float64 `json:"exp"`
	Nbf *float64 `json:"nbf"`
}

// parseClaims reads a JWT's claims by their exact names. encoding/json
// would match "Sub" or "SUB" to sub too and keep the last of duplicates,
// so a claim an issuer copies from what a user chose ({"sub": "alice",
// "Sub": "admin"}) could pick the principal or the expiry. A claim named
// twice is refused (RFC 7519 lets a verifier refuse or take the last).
func parseClaims(b []byte) (jwtClaims, error) {
	var c jwtClaims
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return c, errors.New("the claims are not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return c, err
		}
		name, _ := t.(string)
		if seen[name] {
			return c, fmt.Errorf("claim %q is named twice", name)
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return c, err
		}
		switch name {
		case "sub":
			err = json.Unmarshal(v, &c.Sub)
		case "exp":
			err = json.Unmarshal(v, &c.Exp)
		case "nbf":
			err = json.Unmarshal(v, &c.Nbf)
		}
		if err != nil {
			return c, fmt.Errorf("claim %q: %v", name, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return c, err
	}
	if dec.More() {
		return c, errors.New("data after the claims")
	}
	return c, nil
}

// LooksLikeJWT reports whether tok has a JWT's three dot-separated parts.
func LooksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// VerifyJWT checks an HS256 JWT against key at now: a header without crit
// extensions, the signature, an exp (required: a token that never expires
// is refused), nbf (when present), and a subject. It answers the subject's
// principal, User:<sub> whatever sub holds. Every failure is
// SASL_AUTHENTICATION_FAILED with a message saying which check failed.
func VerifyJWT(tok string, key []byte, now time.Time) (Principal, error) {
	fail := func(format string, args ...any) (Principal, error) {
		return "", errs.Errorf(errs.SaslAuthenticationFailed, "JWT: "+format, args...)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return fail("malformed: want header.payload.signature")
	}
	raw := make([][]byte, 3)
	for i, p := range parts {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			return fail("malformed: part %d is not base64url", i+1)
		}
		raw[i] = b
	}
	var h jwtHeader
	if err := json.Unmarshal(raw[0], &h); err != nil {
		return fail("malformed header: %v", err)
	}
	if h.Alg != "HS256" {
		return fail("algorithm %q is not accepted (only HS256)", h.Alg)
	}
	if h.Crit != nil {
		return fail("header parameter \"crit\" is not accepted (no extensions are understood)")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(mac.Sum(nil), raw[2]) {
		return fail("bad signature")
	}
	c, err := parseClaims(raw[1])
	if err != nil {
		return fail("malformed claims: %v", err)
	}
	if c.Exp == nil {
		return fail("no exp claim (a token must expire)")
	}
	unix := float64(now.UnixNano()) / 1e9
	if unix >= *c.Exp {
		return fail("expired at %s", time.Unix(int64(*c.Exp), 0).UTC().Format(time.RFC3339))
	}
	if c.Nbf != nil && unix < *c.Nbf {
		return fail("not valid before %s", time.Unix(int64(*c.Nbf), 0).UTC().Format(time.RFC3339))
	}
	if c.Sub == "" {
		return fail("no sub claim")
	}
	if err := callerName("JWT: the sub claim", c.Sub); err != nil {
		return "", err
	}
	return user(c.Sub), nil
}

// SignJWT makes an HS256 JWT of claims with key (tests and tools).
func SignJWT(claims map[string]any, key []byte) (string, error) {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	p := base64.RawURLEncoding.EncodeToString(body)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h + "." + p))
	return h + "." + p + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// Config names the files a Verifier reads.
type Config struct {
	TokenFile  string // lines "token principal"; empty: no static tokens
	JWTKeyFile string // the HS256 key (trailing newline ignored); empty: no JWTs
}

// Verifier checks bearer tokens against the files of its Config, which
// Reload reads again.
type Verifier struct {
	cfg Config
	now func() time.Time

	mu     sync.RWMutex
	tokens map[string]Principal
	key    []byte
	stamp  string // the files' sizes and modification times when last read
}

// NewVerifier reads cfg's files; a file that does not load is an error.
func NewVerifier(cfg Config) (*Verifier, error) {
	v := &Verifier{cfg: cfg, now: time.Now}
	if err := v.Reload(); err != nil {
		return nil, err
	}
	return v, nil
}

// Enabled reports whether any token source is configured.
func (v *Verifier) Enabled() bool {
	return v != nil && (v.cfg.TokenFile != "" || v.cfg.JWTKeyFile != "")
}

// Reload reads the files again; on an error the previous contents stay.
func (v *Verifier) Reload() error {
	stamp := v.fileStamp()
	var tokens map[string]Principal
	var key []byte
	if v.cfg.TokenFile != "" {
		data, err := os.ReadFile(v.cfg.TokenFile)
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		if tokens, err = ParseTokenFile(data); err != nil {
			return fmt.Errorf("token file %s: %w", v.cfg.TokenFile, err)
		}
	}
	if v.cfg.JWTKeyFile != "" {
		data, err := os.ReadFile(v.cfg.JWTKeyFile)
		if err != nil {
			return fmt.Errorf("JWT key file: %w", err)
		}
		if key = bytes.TrimRight(data, "\r\n"); len(key) < 16 {
			return fmt.Errorf("JWT key file %s: the key has %d bytes, want at least 16", v.cfg.JWTKeyFile, len(key))
		}
	}
	v.mu.Lock()
	v.tokens, v.key, v.stamp = tokens, key, stamp
	v.mu.Unlock()
	return nil
}

func (v *Verifier) fileStamp() string {
	var b strings.Builder
	for _, f := range []string{v.cfg.TokenFile, v.cfg.JWTKeyFile} {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", f, st.Size(), st.ModTime().UnixNano())
		}
	}
	return b.String()
}

// Changed reports whether a file changed since it was last read.
func (v *Verifier) Changed() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.fileStamp() != v.stamp
}

// Watch reloads the files on SIGHUP and when one changes (checked every
// interval) until ctx ends; onReload hears every attempt.
func (v *Verifier) Watch(ctx context.Context, interval time.Duration, onReload func(error)) {
	tlsconf.WatchFiles(ctx, interval, v.Changed, v.Reload, onReload)
}

// ErrNoTokenSource is the cause of a token refused because the gateway
// takes no tokens at all.
var ErrNoTokenSource = errors.New("this gateway accepts no bearer tokens (no --auth-token-file or --auth-jwt-key-file)")

// Token answers the principal of a bearer token: a static token first,
// then, for a token shaped like a JWT, the JWT check.
func (v *Verifier) Token(tok string) (Principal, error) {
	if !v.Enabled() {
		return "", errs.Errorf(errs.SaslAuthenticationFailed, "%v", ErrNoTokenSource)
	}
	v.mu.RLock()
	tokens, key := v.tokens, v.key
	v.mu.RUnlock()
	for t, p := range tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			return p, nil
		}
	}
	if key != nil && LooksLikeJWT(tok) {
		return VerifyJWT(tok, key, v.now())
	}
	if key != nil && len(tokens) == 0 {
		return "", errs.Errorf(errs.SaslAuthenticationFailed, "JWT: malformed: want header.payload.signature")
	}
	if key == nil && LooksLikeJWT(tok) {
		return "", errs.Errorf(errs.SaslAuthenticationFailed, "unknown bearer token (this gateway takes no JWTs: no --auth-jwt-key-file)")
	}
	return "", errs.Errorf(errs.SaslAuthenticationFailed, "unknown bearer token")
}

// Credentials is what a caller presented.
type Credentials struct {
	Cert          *x509.Certificate // the verified client certificate, if any
	Authorization string            // the Authorization header, if any
}

// Authenticate answers the caller's principal: a bearer token's when one
// is given (it must verify, certificate or not), else the certificate's,
// else "" (no principal).
func (v *Verifier) Authenticate(c Credentials) (Principal, error) {
	tok, ok, err := Bearer(c.Authorization)
	if err != nil {
		return "", err
	}
	if ok {
		return v.Token(tok)
	}
	if c.Cert != nil && c.Cert.Subject.CommonName != "" {
		if err := callerName("the client certificate's common name", c.Cert.Subject.CommonName); err != nil {
			return "", err
		}
	}
	return FromCertificate(c.Cert), nil
}

// callerName refuses a name a caller presents (a certificate's common
// name, a JWT's subject) that cannot be one user's principal: the wildcard
// *, which in an ACL names every user, text that is not UTF-8, and control
// characters (a principal is printed in logs, messages and ACL listings).
func callerName(what, name string) error {
	switch {
	case name == acl.Wildcard:
		return errs.Errorf(errs.SaslAuthenticationFailed, "%s is %q, the wildcard that names every user: a caller's principal names one user", what, name)
	case !utf8.ValidString(name):
		return errs.Errorf(errs.SaslAuthenticationFailed, "%s is not UTF-8 text", what)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return errs.Errorf(errs.SaslAuthenticationFailed, "%s %q holds a control character", what, name)
	}
	return nil
}
