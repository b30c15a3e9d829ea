package k6

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"
)

// Options bound one run of a script.
type Options struct {
	Script     string            // path of the k6 script
	Env        map[string]string // __ENV; nothing of the process environment is passed
	Iterations int               // iterations of the default function per VU (at least 1)
	// VUs overrides the VU count the script's options give; 0 keeps it.
	VUs int
	// StopWhen, when set, is asked after every iteration; true ends every
	// VU's loop before its next iteration.
	StopWhen func(*Result) bool
	// Logf receives console output and iteration errors; nil drops them.
	Logf func(format string, args ...any)
}

// CheckCount is how often one named check passed and failed.
type CheckCount struct{ Passes, Fails int64 }

// MetricValue sums the values added to one custom metric.
type MetricValue struct {
	Kind                string // counter, gauge, rate or trend
	Count               int64  // values added
	Sum, Min, Max, Last float64
	NonZero             int64 // for a rate: values that were true (non-zero)
}

// Result is what a run observed. Its methods are safe during the run.
type Result struct {
	mu         sync.Mutex
	VUs        int            // VUs run
	Options    map[string]any // the script's exported options, as JSON
	checks     map[string]*CheckCount
	metrics    map[string]*MetricValue
	errs       []string
	iterations int64
}

func newResult() *Result {
	return &Result{checks: map[string]*CheckCount{}, metrics: map[string]*MetricValue{}}
}

// Checks answers a copy of the counts of every check evaluated, by name.
func (r *Result) Checks() map[string]CheckCount {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]CheckCount, len(r.checks))
	for k, v := range r.checks {
		out[k] = *v
	}
	return out
}

// Metric answers the named custom metric (zero when nothing was added).
func (r *Result) Metric(name string) MetricValue {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.metrics[name]; m != nil {
		return *m
	}
	return MetricValue{}
}

// Errors answers every exception an iteration, a callback or a metric threw.
func (r *Result) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// Iterations answers the iterations completed (with or without an error).
func (r *Result) Iterations() int64 { return atomic.LoadInt64(&r.iterations) }

func (r *Result) check(name string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.checks[name]
	if c == nil {
		c = &CheckCount{}
		r.checks[name] = c
	}
	if ok {
		c.Passes++
	} else {
		c.Fails++
	}
}

func (r *Result) add(name, kind string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.metrics[name]
	if m == nil {
		m = &MetricValue{Kind: kind, Min: math.Inf(1), Max: math.Inf(-1)}
		r.metrics[name] = m
	}
	m.Count++
	m.Sum += v
	m.Min = math.Min(m.Min, v)
	m.Max = math.Max(m.Max, v)
	m.Last = v
	if v != 0 {
		m.NonZero++
	}
}

func (r *Result) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// Run runs the script as `k6 run` would, bounded by o.Iterations per VU: init
// code in every VU, setup() once (in a VU of its own, __VU 0), the default
// function in every VU, teardown() once. It answers an error when the script
// cannot be loaded or setup() or teardown() throws; exceptions of iterations
// are in the result's Errors, as k6 logs them and goes on.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Iterations < 1 {
		o.Iterations = 1
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	script, err := filepath.Abs(o.Script)
	if err != nil {
		return nil, err
	}
	o.Script = script
	res := newResult()

	setupVU := newVU(ctx, 0, &o, res)
	defer setupVU.close()
	exports, err := setupVU.loadEntry()
	if err != nil {
		return nil, err
	}
	if opts := exports.Get("options"); opts != nil && !goja.IsUndefined(opts) {
		raw, err := setupVU.stringify(opts)
		if err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
		if err := json.Unmarshal([]byte(raw), &res.Options); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
	}
	res.VUs = o.VUs
	if res.VUs == 0 {
		res.VUs = vusOf(res.Options)
	}

	data := "" // setup()'s answer as JSON; empty for undefined
	if fn, ok := goja.AssertFunction(exports.Get("setup")); ok {
		v, err := setupVU.call(fn)
		if err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
		if v != nil && !goja.IsUndefined(v) && !goja.IsNull(v) {
			if data, err = setupVU.stringify(v); err != nil {
				return nil, fmt.Errorf("setup's data: %w", err)
			}
		}
	}

	var stopped atomic.Bool
	var wg sync.WaitGroup
	loadErrs := make([]error, res.VUs)
	for i := 1; i <= res.VUs; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			v := newVU(ctx, id, &o, res)
			defer v.close()
			exp, err := v.loadEntry()
			if err != nil {
				loadErrs[id-1] = fmt.Errorf("VU %d: %w", id, err)
				return
			}
			fn, ok := goja.AssertFunction(exp.Get("default"))
			if !ok {
				loadErrs[id-1] = fmt.Errorf("%s exports no default function", o.Script)
				return
			}
			arg := goja.Undefined()
			if data != "" {
				if arg, err = v.parse(data); err != nil {
					loadErrs[id-1] = err
					return
				}
			}
			for iter := 0; iter < o.Iterations && !stopped.Load() && ctx.Err() == nil; iter++ {
				_ = v.rt.Set("__ITER", iter)
				if _, err := v.call(fn, arg); err != nil {
					res.fail("VU %d iteration %d: %v", id, iter, err)
					o.Logf("VU %d iteration %d: %v", id, iter, err)
				}
				atomic.AddInt64(&res.iterations, 1)
				if o.StopWhen != nil && o.StopWhen(res) {
					stopped.Store(true)
				}
			}
		}(i)
	}
	wg.Wait()
	if err := errors.Join(loadErrs...); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	if fn, ok := goja.AssertFunction(exports.Get("teardown")); ok {
		arg := goja.Undefined()
		if data != "" {
			if arg, err = setupVU.parse(data); err != nil {
				return res, err
			}
		}
		if _, err := setupVU.call(fn, arg); err != nil {
			return res, fmt.Errorf("teardown: %w", err)
		}
	}
	return res, nil
}

// vusOf is the VU count k6 would start for options: the largest vus or
// preAllocatedVUs of any scenario, else options.vus, else 1.
func vusOf(opts map[string]any) int {
	n := 0
	if sc, ok := opts["scenarios"].(map[string]any); ok {
		for _, s := range sc {
			m, _ := s.(map[string]any)
			for _, k := range []string{"vus", "preAllocatedVUs"} {
				if f, ok := m[k].(float64); ok && int(f) > n {
					n = int(f)
				}
			}
		}
	}
	if f, ok := opts["vus"].(float64); ok && n == 0 {
		n = int(f)
	}
	return max(n, 1)
}

// vu is one virtual user: its own runtime, modules, connections and event
// loop, used from one goroutine only.
type vu struct {
	id     int
	ctx    context.Context
	cancel context.CancelFunc
	rt     *goja.Runtime
	o      *Options
	res    *Result
	dir    string // the script's directory

	init    bool                    // true while init code runs
	files   map[string]*goja.Object // loaded file modules' module objects, by path
	natives map[string]*goja.Object // the k6 modules, by name
	loop    *eventLoop
	closers []func()

	jsonParse, jsonStringify goja.Callable
}

func newVU(ctx context.Context, id int, o *Options, res *Result) *vu {
	ctx, cancel := context.WithCancel(ctx)
	v := &vu{
		id: id, ctx: ctx, cancel: cancel, rt: goja.New(), o: o, res: res,
		dir:     filepath.Dir(o.Script),
		files:   map[string]*goja.Object{},
		natives: map[string]*goja.Object{},
		loop:    newEventLoop(),
	}
	j := v.rt.Get("JSON").ToObject(v.rt)
	v.jsonParse, _ = goja.AssertFunction(j.Get("parse"))
	v.jsonStringify, _ = goja.AssertFunction(j.Get("stringify"))

	env := v.rt.NewObject()
	keys := make([]string, 0, len(o.Env))
	for k := range o.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		_ = env.Set(k, o.Env[k])
	}
	_ = v.rt.Set("__ENV", env)
	_ = v.rt.Set("__VU", id)
	_ = v.rt.Set("__ITER", 0)
	console := v.rt.NewObject()
	for _, level := range []string{"log", "info", "warn", "error", "debug"} {
		_ = console.Set(level, func(call goja.FunctionCall) goja.Value {
			parts := make([]string, len(call.Arguments))
			for i, a := range call.Arguments {
				parts[i] = a.String()
			}
			o.Logf("VU %d console.%s: %s", id, level, strings.Join(parts, " "))
			return goja.Undefined()
		})
	}
	_ = v.rt.Set("console", console)
	_ = v.rt.Set("open", v.open)

	stop := make(chan struct{})
	v.closers = append(v.closers, func() { close(stop) })
	go func() {
		select {
		case <-ctx.Done():
			v.rt.Interrupt(ctx.Err())
		case <-stop:
		}
	}()
	return v
}

func (v *vu) close() {
	v.cancel()
	for i := len(v.closers) - 1; i >= 0; i-- {
		v.closers[i]()
	}
}

// throw raises err as a JavaScript exception from a Go function.
func (v *vu) throw(format string, args ...any) {
	panic(v.rt.NewGoError(fmt.Errorf(format, args...)))
}

// initOnly throws outside the init context, as k6 does for what.
func (v *vu) initOnly(what string) {
	if !v.init {
		v.throw("%s is only available in the init context", what)
	}
}

// notInit throws in the init context, as k6 does for what.
func (v *vu) notInit(what string) {
	if v.init {
		v.throw("%s is not available in the init context", what)
	}
}

func (v *vu) parse(s string) (goja.Value, error) {
	return v.jsonParse(goja.Undefined(), v.rt.ToValue(s))
}

func (v *vu) stringify(val goja.Value) (string, error) {
	out, err := v.jsonStringify(goja.Undefined(), val)
	if err != nil {
		return "", err
	}
	if goja.IsUndefined(out) {
		return "", nil
	}
	return out.String(), nil
}

// call runs fn, then the event loop until every stream it opened has ended.
func (v *vu) call(fn goja.Callable, args ...goja.Value) (goja.Value, error) {
	out, err := fn(goja.Undefined(), args...)
	if lerr := v.loop.run(v.ctx); err == nil {
		err = lerr
	}
	return out, err
}

// loadEntry runs the script's init code and answers its exports.
func (v *vu) loadEntry() (*goja.Object, error) {
	v.init = true
	defer func() { v.init = false }()
	var exports *goja.Object
	err := catch(func() { exports = v.requireFile(v.o.Script) })
	return exports, err
}

// catch turns a JavaScript exception thrown by f into an error.
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			switch x := r.(type) {
			case *goja.Exception:
				err = x
			case *goja.InterruptedError:
				err = x
			case goja.Value:
				err = errors.New(x.String())
			default:
				panic(r)
			}
		}
	}()
	f()
	return nil
}

// requireFn is the require function of a file in dir.
func (v *vu) requireFn(dir string) func(goja.FunctionCall) goja.Value {
	return func(call goja.FunctionCall) goja.Value {
		name := call.Argument(0).String()
		if m, ok := v.natives[name]; ok {
			return m
		}
		if mk, ok := nativeModules[name]; ok {
			m := mk(v)
			_ = m.Set("__esModule", true)
			v.natives[name] = m
			return m
		}
		if strings.HasPrefix(name, "./") || strings.HasPrefix(name, "../") || filepath.IsAbs(name) {
			p := name
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, name)
			}
			return v.requireFile(p)
		}
		v.throw("module %q has no shim here (k6, k6/http, k6/metrics, k6/net/grpc and relative files are supported)", name)
		return nil
	}
}

// requireFile evaluates the file once per VU and answers its exports.
func (v *vu) requireFile(path string) *goja.Object {
	if m, ok := v.files[path]; ok {
		return m.Get("exports").ToObject(v.rt)
	}
	prg, err := compileFile(path)
	if err != nil {
		panic(v.rt.NewGoError(err))
	}
	fnv, err := v.rt.RunProgram(prg)
	if err != nil {
		panic(err)
	}
	fn, _ := goja.AssertFunction(fnv)
	module, exports := v.rt.NewObject(), v.rt.NewObject()
	_ = module.Set("exports", exports)
	v.files[path] = module
	dir := filepath.Dir(path)
	if _, err := fn(goja.Undefined(), exports, v.rt.ToValue(v.requireFn(dir)), module, v.rt.ToValue(path), v.rt.ToValue(dir)); err != nil {
		panic(err)
	}
	return module.Get("exports").ToObject(v.rt)
}

// open is k6's open(path, mode): a file's text, or with "b" its bytes, in
// the init context.
func (v *vu) open(call goja.FunctionCall) goja.Value {
	v.initOnly("open()")
	p := call.Argument(0).String()
	if !filepath.IsAbs(p) {
		p = filepath.Join(v.dir, p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		v.throw("open: %v", err)
	}
	if call.Argument(1).String() == "b" {
		return v.rt.ToValue(v.rt.NewArrayBuffer(b))
	}
	return v.rt.ToValue(string(b))
}

// compiled caches each file's program: a goja.Program runs in any runtime.
var compiled sync.Map // path -> *compiledFile

type compiledFile struct {
	once sync.Once
	prg  *goja.Program
	err  error
}

// compileFile turns an ES module into a CommonJS function expression (with
// an inline source map, so stack traces name the script's own lines) and
// compiles it.
func compileFile(path string) (*goja.Program, error) {
	c, _ := compiled.LoadOrStore(path, &compiledFile{})
	cf := c.(*compiledFile)
	cf.once.Do(func() {
		src, err := os.ReadFile(path)
		if err != nil {
			cf.err = err
			return
		}
		out := api.Transform(string(src), api.TransformOptions{
			Loader:     api.LoaderJS,
			Format:     api.FormatCommonJS,
			Target:     api.ES2017,
			Sourcefile: path,
			Sourcemap:  api.SourceMapInline,
		})
		if len(out.Errors) > 0 {
			msgs := make([]string, len(out.Errors))
			for i, e := range out.Errors {
				msgs[i] = e.Text
				if e.Location != nil {
					msgs[i] = fmt.Sprintf("%s:%d:%d: %s", e.Location.File, e.Location.Line, e.Location.Column, e.Text)
				}
			}
			cf.err = fmt.Errorf("transforming %s: %s", path, strings.Join(msgs, "; "))
			return
		}
		wrapped := "(function (exports, require, module, __filename, __dirname) {" + string(out.Code) + "\n})"
		cf.prg, cf.err = goja.Compile(path, wrapped, true)
	})
	return cf.prg, cf.err
}

// eventLoop runs callbacks posted by other goroutines (stream messages) on
// the VU's goroutine, as k6's per-VU event loop does: an iteration ends once
// every stream it opened has ended.
type eventLoop struct {
	mu      sync.Mutex
	queue   []func() error
	wake    chan struct{}
	pending int // open streams; touched on the VU's goroutine only
}

func newEventLoop() *eventLoop { return &eventLoop{wake: make(chan struct{}, 1)} }

func (l *eventLoop) post(f func() error) {
	l.mu.Lock()
	l.queue = append(l.queue, f)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run runs posted callbacks until nothing is pending; the first callback
// error is answered after the loop drains.
func (l *eventLoop) run(ctx context.Context) error {
	var first error
	for {
		l.mu.Lock()
		q := l.queue
		l.queue = nil
		l.mu.Unlock()
		for _, f := range q {
			if err := f(); err != nil && first == nil {
				first = err
			}
		}
		if len(q) > 0 {
			continue
		}
		if l.pending == 0 {
			return first
		}
		select {
		case <-l.wake:
		case <-ctx.Done():
			return errors.Join(first, fmt.Errorf("%d stream(s) still open: %w", l.pending, ctx.Err()))
		}
	}
}
