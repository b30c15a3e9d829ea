package k6

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"
)

// nativeModules builds each k6 module for one VU.
var nativeModules = map[string]func(*vu) *goja.Object{
	"k6":          k6Module,
	"k6/metrics":  metricsModule,
	"k6/http":     httpModule,
	"k6/net/grpc": grpcModule,
}

// withDefault makes m its own default export too, as k6's modules are.
func withDefault(m *goja.Object) *goja.Object {
	_ = m.Set("default", m)
	return m
}

// k6Module: check, group, sleep, fail.
func k6Module(v *vu) *goja.Object {
	m := v.rt.NewObject()
	_ = m.Set("check", func(call goja.FunctionCall) goja.Value {
		v.notInit("check()")
		val := call.Argument(0)
		sets := call.Argument(1)
		if goja.IsUndefined(sets) || goja.IsNull(sets) {
			v.throw("check() needs an object of checks")
		}
		obj := sets.ToObject(v.rt)
		all := true
		for _, name := range obj.Keys() {
			c := obj.Get(name)
			ok := false
			if fn, isFn := goja.AssertFunction(c); isFn {
				out, err := fn(goja.Undefined(), val)
				if err != nil {
					panic(err)
				}
				ok = out.ToBoolean()
			} else {
				ok = c.ToBoolean()
			}
			v.res.check(name, ok)
			all = all && ok
		}
		return v.rt.ToValue(all)
	})
	_ = m.Set("group", func(call goja.FunctionCall) goja.Value {
		v.notInit("group()")
		fn, ok := goja.AssertFunction(call.Argument(1))
		if !ok {
			v.throw("group() needs a function")
		}
		out, err := fn(goja.Undefined())
		if err != nil {
			panic(err)
		}
		return out
	})
	_ = m.Set("sleep", func(secs float64) {
		v.notInit("sleep()")
		t := time.NewTimer(time.Duration(secs * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-v.ctx.Done():
		}
	})
	_ = m.Set("fail", func(call goja.FunctionCall) goja.Value {
		v.throw("%s", call.Argument(0).String())
		return nil
	})
	return withDefault(m)
}

var metricName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,127}$`)

// metricsModule: Counter, Gauge, Rate and Trend, created in the init
// context, added to in iterations; values are summed into the result.
func metricsModule(v *vu) *goja.Object {
	m := v.rt.NewObject()
	for _, kind := range []string{"Counter", "Gauge", "Rate", "Trend"} {
		_ = m.Set(kind, func(call goja.ConstructorCall) *goja.Object {
			v.initOnly("new " + kind + "()")
			name := call.Argument(0).String()
			if !metricName.MatchString(name) {
				v.throw("invalid metric name %q", name)
			}
			_ = call.This.Set("name", name)
			_ = call.This.Set("add", func(c goja.FunctionCall) goja.Value {
				v.notInit(name + ".add()")
				x := c.Argument(0)
				var f float64
				if b, ok := x.Export().(bool); ok {
					if b {
						f = 1
					}
				} else {
					f = x.ToFloat()
				}
				if math.IsNaN(f) || math.IsInf(f, 0) {
					v.res.fail("VU %d: %s.add(%s): not a number", v.id, name, x)
					return v.rt.ToValue(false)
				}
				v.res.add(name, strings.ToLower(kind), f)
				return v.rt.ToValue(true)
			})
			return nil
		})
	}
	return withDefault(m)
}

// httpModule: request and its method helpers over net/http, answering k6's
// Response (status, body, headers, timings, error, json()). A transport
// error is a response with status 0 and error set, as in k6.
func httpModule(v *vu) *goja.Object {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	v.closers = append(v.closers, tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	m := v.rt.NewObject()
	do := func(method string, rawURL goja.Value, body, params goja.Value) goja.Value {
		v.notInit("http requests")
		return v.httpDo(client, method, rawURL.String(), body, params)
	}
	_ = m.Set("request", func(c goja.FunctionCall) goja.Value {
		return do(strings.ToUpper(c.Argument(0).String()), c.Argument(1), c.Argument(2), c.Argument(3))
	})
	for _, mth := range []string{"GET", "HEAD"} {
		_ = m.Set(strings.ToLower(mth), func(c goja.FunctionCall) goja.Value {
			return do(mth, c.Argument(0), goja.Undefined(), c.Argument(1))
		})
	}
	for name, mth := range map[string]string{"post": "POST", "put": "PUT", "patch": "PATCH", "del": "DELETE", "options": "OPTIONS"} {
		_ = m.Set(name, func(c goja.FunctionCall) goja.Value {
			return do(mth, c.Argument(0), c.Argument(1), c.Argument(2))
		})
	}
	return withDefault(m)
}

func (v *vu) httpDo(client *http.Client, method, rawURL string, body, params goja.Value) goja.Value {
	var payload io.Reader
	contentType := ""
	switch {
	case goja.IsUndefined(body) || goja.IsNull(body):
	default:
		switch b := body.Export().(type) {
		case string:
			payload = strings.NewReader(b)
		case goja.ArrayBuffer:
			payload = bytes.NewReader(b.Bytes())
		case map[string]any:
			form := url.Values{}
			for k, x := range b {
				form.Set(k, fmt.Sprint(x))
			}
			payload = strings.NewReader(form.Encode())
			contentType = "application/x-www-form-urlencoded"
		default:
			v.throw("http body of type %T is not supported here", b)
		}
	}
	timeout := 60 * time.Second
	headers := http.Header{}
	if !goja.IsUndefined(params) && !goja.IsNull(params) {
		p := params.ToObject(v.rt)
		if h := p.Get("headers"); h != nil && !goja.IsUndefined(h) && !goja.IsNull(h) {
			ho := h.ToObject(v.rt)
			for _, k := range ho.Keys() {
				headers.Set(k, ho.Get(k).String())
			}
		}
		if t := p.Get("timeout"); t != nil && !goja.IsUndefined(t) {
			timeout = k6Duration(v, t)
		}
	}
	ctx, cancel := context.WithTimeout(v.ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, rawURL, payload)
	if err != nil {
		v.throw("http: %v", err)
	}
	req.Header = headers
	if contentType != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", contentType)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "k6-shim (goja)")
	}

	r := v.rt.NewObject()
	_ = r.Set("url", rawURL)
	start := time.Now()
	resp, err := client.Do(req)
	var raw []byte
	var waiting time.Duration
	if err == nil {
		waiting = time.Since(start)
		raw, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	total := time.Since(start)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	timings := v.rt.NewObject()
	_ = timings.Set("duration", ms(total))
	_ = timings.Set("waiting", ms(waiting))
	_ = timings.Set("receiving", ms(total-waiting))
	for _, k := range []string{"blocked", "connecting", "tls_handshaking", "sending"} {
		_ = timings.Set(k, 0)
	}
	_ = r.Set("timings", timings)
	if err != nil {
		_ = r.Set("status", 0)
		_ = r.Set("body", goja.Null())
		_ = r.Set("error", err.Error())
		_ = r.Set("error_code", 1000)
		_ = r.Set("headers", v.rt.NewObject())
	} else {
		_ = r.Set("status", resp.StatusCode)
		_ = r.Set("status_text", resp.Status)
		_ = r.Set("proto", resp.Proto)
		_ = r.Set("body", string(raw))
		_ = r.Set("error", "")
		_ = r.Set("error_code", 0)
		h := v.rt.NewObject()
		for k, vals := range resp.Header {
			_ = h.Set(k, strings.Join(vals, ", "))
		}
		_ = r.Set("headers", h)
	}
	_ = r.Set("json", func(c goja.FunctionCall) goja.Value {
		if err != nil {
			v.throw("json(): the request failed: %v", err)
		}
		doc, perr := v.parse(string(raw))
		if perr != nil {
			v.throw("cannot parse json: %v", perr)
		}
		sel := c.Argument(0)
		if goja.IsUndefined(sel) || sel.String() == "" {
			return doc
		}
		return selectPath(v.rt, doc, sel.String())
	})
	return r
}

// selectPath follows a dotted path (names, array indexes) as the simple
// forms of k6's json(selector) do; undefined where it leads nowhere.
func selectPath(rt *goja.Runtime, doc goja.Value, path string) goja.Value {
	cur := doc
	for _, part := range strings.Split(path, ".") {
		if goja.IsUndefined(cur) || goja.IsNull(cur) {
			return goja.Undefined()
		}
		obj := cur.ToObject(rt)
		next := obj.Get(part)
		if next == nil {
			return goja.Undefined()
		}
		cur = next
	}
	return cur
}

// k6Duration reads a timeout: a number of milliseconds or a duration string.
func k6Duration(v *vu, t goja.Value) time.Duration {
	if s, ok := t.Export().(string); ok {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
		if n, err := strconv.ParseFloat(s, 64); err == nil {
			return time.Duration(n * float64(time.Millisecond))
		}
		v.throw("bad timeout %q", s)
	}
	return time.Duration(t.ToFloat() * float64(time.Millisecond))
}
