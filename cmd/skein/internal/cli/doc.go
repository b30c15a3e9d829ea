// Package cli is the `skein` command line: topic administration, produce
// and consume against a gateway's gRPC API, cluster description, and `skein
// dev`, which runs a whole cluster locally (package devcluster).
//
// Every command takes --gateway (env SKEIN_GATEWAY, default 127.0.0.1:9090):
// the gateway's gRPC address. Flags have environment twins SKEIN_<FLAG>.
// Output is for people (tables, one record per line) unless --json asks for
// the API's JSON.
package cli
