// Package fsm is the controller's metadata state machine: pure and
// deterministic. Apply takes a Raft log entry (a controllerv1.Command) and
// its index, checks it against the current metadata image, and answers the
// records it produced (applied to the image, stamped with the index: the
// MetadataDelta that WatchMetadata sends) plus the reply for the caller, or
// a refusal from libs/errs.
//
// Rules the machine keeps:
//   - a leader is always in its partition's ISR, and every ISR member is a
//     replica;
//   - a fenced broker leads nothing and is in no ISR, except that the last
//     ISR member of a partition that lost every in-sync replica stays in the
//     ISR (leader -1) so it can lead again when it comes back, as Kafka does
//     — unless it comes back with another data directory: its logs are
//     gone, the ISR is left empty (leader -1) and the lost replica recorded,
//     until the directory comes back or an unclean election, which passes
//     that replica over while another is live;
//   - leaders are elected from the ISR only, unless the topic enables
//     unclean.leader.election.enable or an unclean election is asked for;
//   - every leader change bumps the leader epoch, every change of a
//     partition bumps the partition epoch, every change of a coordinator
//     partition's owner bumps the coordinator epoch;
//   - producer ids are handed out once: the next id only moves forward.
//
// No I/O, no clock, no goroutines, no randomness: equal images and equal
// commands give equal results on every controller. Errors are results;
// nothing panics on bad input.
package fsm
