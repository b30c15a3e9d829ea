// Package contract checks the public API's contract files against API.md: the
// REST mapping in proto/skein/v1/http.yaml and the generated OpenAPI document.
package contract
