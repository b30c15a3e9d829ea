package console

import (
	"embed"
	"io/fs"
	"net/http"
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
	mux.Handle("GET /v1/events", guard(hub, false))
	mux.Handle("GET /v1/console/demo", guard(http.HandlerFunc(demos.Status), false))
	mux.Handle("POST /v1/console/demo/storage/{id}/{action}", guard(http.HandlerFunc(demos.Act), true))
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
