// Package filelock holds an exclusive advisory lock on an open file
// (flock(2)): serve's lock on its data directory, and the outbox's locks
// on journals and spool files that replicas share. SyncDir makes the
// names made in a directory outlive a power cut. Open opens a file of the
// data directory, and OpenRead and ReadFile a file an operator names,
// judging the file opened: a link (Open), a FIFO or a device put in its
// place is refused, never written, truncated or waited on.
//
// Where flock(2) is missing, TryLock always succeeds and Lock and Unlock
// do nothing: nothing there stops two processes sharing one file, so
// give each its own data directory.
package filelock
