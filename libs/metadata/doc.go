// Package metadata is the cluster metadata image every Skein process holds:
// the controller's state machine keeps one as its state, and every watcher
// (storage nodes, coordinators, the gateway) rebuilds one from the controller's
// WatchMetadata stream — an image, then deltas.
//
// An Image is built from a controllerv1.MetadataImage (FromProto) or empty
// (New), moves forward with Apply(*controllerv1.MetadataDelta), answers
// lookups (topic by name or id, partition state, brokers, the coordinator that
// owns a group or transactional id) and turns back into a MetadataImage with
// ToProto. The package does no I/O, starts no goroutine and never panics on
// bad input: a delta that does not fit the image is refused with an error and
// leaves the image as it was.
//
// Contract:
//   - Records stored in an Image are never modified in place: an upsert swaps
//     in a copy, so the records lookups return may be kept and read freely by
//     their caller, who must not modify them.
//   - The version never goes backwards: a delta with a version below the
//     image's is refused. A delta with the image's own version is accepted,
//     so the controller may apply one command's records in several steps.
//   - An Image is not safe for concurrent use; Clone gives an independent copy.
package metadata
