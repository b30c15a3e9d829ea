package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"skein/libs/cliflag"
	"skein/libs/tlsconf"
)

// flags is a FlagSet whose defaults come from environment twins, so every
// setting can be given either way (the flag wins).
type flags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

func newFlags(name string, getenv func(string) string, out io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return &flags{fs: fs, getenv: getenv}
}

func (f *flags) env(env string) (string, bool) {
	v := f.getenv(env)
	return v, v != ""
}

func (f *flags) str(name, env, def, usage string) *string {
	if v, ok := f.env(env); ok {
		def = v
	}
	return f.fs.String(name, def, usage+" (env "+env+")")
}

func (f *flags) integer(name, env string, def int, usage string) *int {
	if v, ok := f.env(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s=%q: not an integer", env, v))
		}
		def = n
	}
	return f.fs.Int(name, def, usage+" (env "+env+")")
}

func (f *flags) dur(name, env string, def time.Duration, usage string) *time.Duration {
	if v, ok := f.env(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s=%q: not a duration", env, v))
		}
		def = d
	}
	return f.fs.Duration(name, def, usage+" (env "+env+")")
}

// twin gives an already registered flag an environment twin: env, when
// set, is the flag's value unless the command line sets it too.
func (f *flags) twin(name, env string) {
	fl := f.fs.Lookup(name)
	fl.Usage += " (env " + env + ")"
	if v, ok := f.env(env); ok {
		if err := fl.Value.Set(v); err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s=%q: %v", env, v, err))
		}
		fl.DefValue = v
	}
}

// tls registers --tls-cert, --tls-key and --tls-ca.
func (f *flags) tls() func() tlsconf.Files {
	cert := f.str("tls-cert", "SKEIN_TLS_CERT", "", "PEM certificate (chain) of this controller; with --tls-key and --tls-ca its gRPC, HTTP and Raft listeners and every connection it makes use mutual TLS")
	key := f.str("tls-key", "SKEIN_TLS_KEY", "", "PEM private key of --tls-cert")
	ca := f.str("tls-ca", "SKEIN_TLS_CA", "", "PEM certificates of the CAs this controller trusts, for its peers' certificates")
	return func() tlsconf.Files { return tlsconf.Files{Cert: *cert, Key: *key, CA: *ca} }
}

func (f *flags) parse(args []string) error {
	if len(f.errs) > 0 {
		return cliflag.UsageError{Err: f.errs[0]}
	}
	if err := f.fs.Parse(args); err != nil {
		return cliflag.UsageError{Err: err}
	}
	if f.fs.NArg() > 0 {
		return cliflag.UsageError{Err: fmt.Errorf("unexpected arguments: %v", f.fs.Args())}
	}
	return nil
}
