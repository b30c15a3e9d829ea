// Package openapi serves the OpenAPI document generated from the public
// protos (skein.swagger.json, written by `make proto`).
package openapi

import _ "embed"

// JSON is the OpenAPI v2 document of the public REST API.
//
//go:embed skein.swagger.json
var JSON []byte
