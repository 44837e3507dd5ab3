// Package defaults sets the unset fields of a package's Config to their
// defaults, each rule written once: a number at or below zero is unset
// (so a negative value takes the default too, where cmp.Or would keep
// it), a nil logger is slog.Default() and a nil clock is time.Now.
package defaults

import (
	"log/slog"
	"time"
)

// Positive sets *v to d when *v is zero or negative.
func Positive[T ~int | ~int32 | ~int64 | ~float64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Logger sets *l to slog.Default() when it is nil.
func Logger(l **slog.Logger) {
	if *l == nil {
		*l = slog.Default()
	}
}

// Clock sets *now to time.Now when it is nil.
func Clock(now *func() time.Time) {
	if *now == nil {
		*now = time.Now
	}
}
