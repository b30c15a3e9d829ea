// Package membership is the gossip layer every Skein process joins: a thin
// wrapper over hashicorp/memberlist that carries each process's role, id and
// addresses in its node meta, joins seed addresses (retrying in the background
// until one answers), and turns memberlist's callbacks into one ordered
// channel of Join / Update / Leave / Dead events.
//
// Gossip is Skein's failure detector: the active controller turns a storage
// node or coordinator that is Dead or has Left into metadata changes. Timings
// defaults to FastTimings, which on loopback or a LAN declares a killed
// process dead in about one to two seconds; a graceful Close announces the
// leave at once.
//
// Contract: events about the local node are not delivered; events are never
// dropped (the queue between memberlist and Events is unbounded), so a
// consumer that stalls delays them but misses none; Events is closed by Close.
package membership
