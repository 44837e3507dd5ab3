package pool

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/intentius/boxbroker/internal/protocol"
)

// MaxWeight bounds an entry's weight.
const MaxWeight = 1000

// Errors of CheckEntry, fit to show to the operator; none holds a value.
var (
	ErrName   = errors.New("an entry's name is 1 to 64 characters: lower-case letters, digits, '-', '_' and '.', starting with a letter or digit")
	ErrWeight = fmt.Errorf("an entry's weight is a whole number from 1 to %d", MaxWeight)
)

// ValidName reports whether name may name an entry.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		switch {
		case b >= 'a' && b <= 'z', b >= '0' && b <= '9':
		case (b == '-' || b == '_' || b == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}

// CheckEntry checks an entry's name, weight and base URL ("" for the
// broker's --anthropic-url), returning the URL in its canonical form.
// The Default entry is the shared credential, whose weight is 1 and whose
// URL is the broker's.
func CheckEntry(name string, weight int, rawURL string) (string, error) {
	if !ValidName(name) {
		return "", ErrName
	}
	if weight < 1 || weight > MaxWeight {
		return "", ErrWeight
	}
	if name == Default && (weight != 1 || rawURL != "") {
		return "", errors.New("the default entry is the shared credential (`credential set anthropic`): its weight is 1 and its URL the broker's --anthropic-url")
	}
	if rawURL == "" {
		return "", nil
	}
	if len(rawURL) > 2048 {
		return "", errors.New("an entry's URL is at most 2048 bytes")
	}
	// The scheme and the user are judged here, in the entry's words:
	// ParseSecretHost's say what an egress secret's host is.
	if p, err := url.Parse(rawURL); err == nil {
		if p.Scheme != "https" && p.Scheme != "http" {
			return "", errors.New("an entry's URL is an Anthropic-compatible base URL: https:// (or http://) with a host, such as https://llm-gateway.internal/anthropic")
		}
		if p.User != nil {
			return "", errors.New("an entry's URL must not hold a user or password: the entry's value, read from stdin, is what the broker sends")
		}
	}
	u, err := protocol.ParseSecretHost(rawURL)
	if err != nil {
		return "", fmt.Errorf("an entry's URL is an Anthropic-compatible base URL, http(s) with a host and no credentials, query or fragment: %w", err)
	}
	return u.String(), nil
}
