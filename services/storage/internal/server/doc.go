// Package server is the storage node's gRPC shell: it turns StorageService
// requests into calls on the hosted partition replicas and their results (or
// errors from the errs table) into per-partition answers. Long polls wait on
// the replicas' HW / LEO notification channels, never on timers alone.
package server
