// Package gateway wires the public API together: one gRPC server (the
// services of package api, server reflection, health) and one HTTP server
// (the same services as REST/JSON through grpc-gateway over an in-memory
// loopback gRPC connection, plus /openapi.json, /healthz, /readyz and
// /metrics), both on a libs/client Client that follows the controllers.
//
// Contract:
//   - REST JSON uses the proto field names and emits zero values; unknown
//     fields, malformed JSON and wrong field types are 400 INVALID_REQUEST.
//   - Every REST error is {"code": <grpc code>, "error_code": "<Kafka name>",
//     "message": "…"} with the HTTP status of the libs/errs row.
//   - /readyz is 200 once metadata from a controller has arrived, 503 before.
//   - AdminService, ProducerService, ConsumerService and GroupService are
//     served; TransactionService is planned and absent, not stubbed.
//   - Serve stops on context end: it stops accepting, lets in-flight calls
//     finish (bounded by Config.ShutdownGrace) and flushes producers.
package gateway
