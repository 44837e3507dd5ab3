package brokertest

import "github.com/intentius/boxbroker/internal/upstreamtest"

// Buffer is a bytes.Buffer safe to write from the server's goroutines
// while a test reads it, for logs and a command's output
// (upstreamtest.Buffer, for tests that start no broker).
type Buffer = upstreamtest.Buffer
