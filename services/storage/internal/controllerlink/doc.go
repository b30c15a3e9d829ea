// Package controllerlink is a storage node's connection to the controller
// quorum: it registers the broker (getting a broker epoch), heartbeats to keep
// its session, follows WatchMetadata into a metadata.Image, and sends the
// replicas' ISR changes (AlterPartition) and the controlled shutdown. Any
// controller will do: followers forward writes to the Raft leader, so the link
// simply moves to the next address when one fails.
package controllerlink
