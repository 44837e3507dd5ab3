//go:build unix

package secrets

import "syscall"

// openNoWait is the flag with which an open returns at once where it
// would wait: on a FIFO with no writer.
const openNoWait = syscall.O_NONBLOCK
