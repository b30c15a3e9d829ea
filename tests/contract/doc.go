// Package contract checks the public API's contract files against the
// repository's API document, docs/API.md: the REST mapping in
// proto/skein/v1/http.yaml, the protos' RPCs and the generated OpenAPI
// document.
package contract
