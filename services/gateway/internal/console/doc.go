// Package console is Skein Console, the gateway's live web view of the
// cluster: static pages embedded in the binary (served under /console/),
// the server-sent event stream that feeds them (GET /v1/events) and the
// demo routes that kill, pause and resume the storage nodes of a `skein
// dev` cluster (only with --console-demos and the cluster's cluster.json).
//
// The stream is fed by a Source: the gateway's metadata (cheap, read on
// every metadata change) and, while anyone is subscribed, a read of the
// partitions' offsets from the storage nodes at most every Interval. Each
// subscriber has a bounded buffer; one that falls behind is dropped, so a
// slow browser never holds the gateway up.
package console
