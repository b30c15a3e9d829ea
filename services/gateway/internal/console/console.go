package console

import (
	"embed"
	"io/fs"
	"net/http"

	"skein/libs/errs"
)

//go:embed assets
var assets embed.FS

// Assets are the console's static files (index.html, console.css,
// console.js), for tests.
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	return sub
}

// Guard wraps a route with what its callers must be allowed: to describe
// the cluster (the event stream, the demos' status) or to alter it (a demo
// action). Nil serves every caller.
type Guard func(h http.Handler, alters bool) http.Handler

// Register adds the console's routes to mux: the pages under /console/,
// the event stream and the demo routes, the last two behind guard.
func Register(mux *http.ServeMux, hub *Hub, demos *Demos, guard Guard) {
	if guard == nil {
		guard = func(h http.Handler, _ bool) http.Handler { return h }
	}
	files := http.StripPrefix("/console/", http.FileServerFS(Assets()))
	mux.Handle("GET /console/", pageHeaders(files))
	mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	mux.Handle("GET /v1/events", noQuery(guard(hub, false)))
	mux.Handle("GET /v1/console/demo", noQuery(guard(http.HandlerFunc(demos.Status), false)))
	mux.Handle("POST /v1/console/demo/storage/{id}/{action}", noQuery(guard(http.HandlerFunc(demos.Act), true)))
	// Another method on these paths is 405, as on the API's routes; the
	// mux would otherwise hand it to the API's router, which knows no such
	// path and answers 404.
	mux.Handle("/v1/events", methodNotAllowed(http.MethodGet))
	mux.Handle("/v1/console/demo", methodNotAllowed(http.MethodGet))
	mux.Handle("/v1/console/demo/storage/{id}/{action}", methodNotAllowed(http.MethodPost))
}

// codeUnimplemented is the REST error document's code for a method a path
// does not take (docs/API.md).
const codeUnimplemented = 12

func methodNotAllowed(allowed string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allowed)
		writeError(w, http.StatusMethodNotAllowed, codeUnimplemented, errs.InvalidRequest.Name,
			"method "+r.Method+" is not allowed on "+r.URL.Path)
	})
}

// noQuery refuses a query parameter: the console's routes take none, and
// one ignored (?action=kill on a pause) would do what the caller did not
// ask, as the API's routes refuse theirs.
func noQuery(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			writeError(w, http.StatusBadRequest, codeInvalidArgument, errs.InvalidRequest.Name,
				"unknown query parameter in \""+r.URL.RawQuery+"\": "+r.Method+" "+r.URL.Path+" takes none")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// pageHeaders makes browsers revalidate the pages, so a new gateway's
// console is seen at once, and keeps other sites from framing them: the
// console's buttons create topics and (with demos) stop nodes, and a
// request from a framed console is same-origin, which the API's
// cross-origin check lets through.
func pageHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}
