// Package fault holds the real-process fault tests (build tag integration):
// a whole `skein dev` cluster driven through the gateway while its processes
// are paused, killed or cut off, with an audit of what every writer and
// reader saw — no acknowledged record lost, none written twice, no offset
// with two records, and the rest of libs/history's anomalies — and the
// availability figures around each fault.
package fault
