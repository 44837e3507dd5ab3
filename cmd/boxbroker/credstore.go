package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/intentius/boxbroker/internal/cloud"
)

// readRawCredential reads an Anthropic credential of kind from stdin,
// unchecked: for anthropic ("" too) the key or setup token itself
// (readSecret); for bedrock or vertex the cloud account's JSON as given.
// No error holds any of it.
func (c *cli) readRawCredential(kind, prompt string) ([]byte, error) {
	switch kind {
	case "", cloud.KindAnthropic:
		return c.readSecret(prompt)
	case cloud.KindBedrock, cloud.KindVertex:
	default:
		return nil, fmt.Errorf("%w: --kind is one of %s", errUsage, strings.Join(cloud.Kinds, ", "))
	}
	if f, ok := c.stdin.(*os.File); ok && isTerminal(f) {
		return nil, fmt.Errorf("a %s credential is a JSON object: pipe it in from a file, as in `boxbroker credential set anthropic --kind %s < %s.json` (docs/cloud.md)", kind, kind, kind)
	}
	b, err := io.ReadAll(io.LimitReader(c.stdin, cloud.MaxValue+1))
	if err != nil {
		clear(b)
		return nil, fmt.Errorf("read stdin: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("no value on stdin: pipe the %s credential's JSON in (docs/cloud.md)", kind)
	}
	if len(b) > cloud.MaxValue {
		clear(b)
		return nil, fmt.Errorf("the %s credential on stdin is over %d bytes", kind, cloud.MaxValue)
	}
	return b, nil
}
