// Package outboxtest is what the tests of the outbox, and of the packages
// that append to their files through it, need of the outbox beyond its
// API.
package outboxtest

import "github.com/intentius/boxbroker/internal/outbox/internal/diskfull"

// FailAppendsAfter makes every outbox.AppendSynced write, until restore
// is called, keep only the first n bytes of what it is given and fail, as
// on a full disk.
func FailAppendsAfter(n int) (restore func()) { return diskfull.After(n) }
