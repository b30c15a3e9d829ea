// Package fetcher is a storage node's follower side of replication: one
// goroutine and one long-lived Replicate stream per leader broker, carrying
// every partition this node follows from that leader, as Kafka's replica
// fetcher threads do. Each round sends every partition's fetch position (its
// LEO, which acknowledges everything below it, and the epoch of its last
// batch, which lets the leader spot a diverged tail) and applies the answer.
package fetcher
