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

// Register adds the console's routes to mux: the pages under /console/,
// the event stream and the demo routes.
func Register(mux *http.ServeMux, hub *Hub, demos *Demos) {
	files := http.StripPrefix("/console/", http.FileServerFS(Assets()))
	mux.Handle("GET /console/", noCache(files))
	mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	mux.Handle("GET /v1/events", hub)
	mux.HandleFunc("GET /v1/console/demo", demos.Status)
	mux.HandleFunc("POST /v1/console/demo/storage/{id}/{action}", demos.Act)
}

// noCache makes browsers revalidate the pages, so a new gateway's console
// is seen at once.
func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}
