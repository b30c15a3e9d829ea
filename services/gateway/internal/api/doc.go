// Package api implements the public gRPC services of skein.v1 that the
// gateway serves — AdminService, ProducerService, ConsumerService and
// GroupService — on top of libs/client. The REST API is the same services
// through grpc-gateway.
//
// Contract:
//   - Every input is validated here before it reaches the cluster: topic
//     names (INVALID_TOPIC_EXCEPTION), acks (INVALID_REQUIRED_ACKS), partitions
//     out of range (UNKNOWN_TOPIC_OR_PARTITION), records above the topic's
//     max.message.bytes (MESSAGE_TOO_LARGE), malformed records (INVALID_REQUEST).
//   - A request that is refused as a whole answers an errs row (mapped to a
//     gRPC status by ErrorInterceptors); failures of single records or
//     partitions of a processed request come back in the body with their
//     error_code.
//   - Produce answers one result per record, in request order. Records carry
//     the producing span's W3C traceparent as a header.
//   - GroupService keeps no member state (see Group): the coordinator holds
//     membership and assignments; a member's positions travel in its
//     requests. Consumed records open a span in their producer's trace.
//   - Fetched keys, values and header values come back as text when they are
//     valid UTF-8 under Encoding TEXT, as bytes otherwise or under BYTES.
package api
