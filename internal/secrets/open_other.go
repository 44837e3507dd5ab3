//go:build !unix

package secrets

// openNoWait is the flag with which an open returns at once where it
// would wait; none here.
const openNoWait = 0
