// Package isr is the pure arithmetic of in-sync replicas: the high watermark
// as the minimum log end offset over the ISR, when a follower counts as caught
// up, and which followers should leave or rejoin the ISR. No locks, no I/O,
// no clocks: the partition's owner feeds it offsets and times.
package isr
