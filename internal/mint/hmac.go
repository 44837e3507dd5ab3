package mint

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"time"
)

// What an hmac secret signs.
const (
	SignBody      = "body"
	SignCanonical = "canonical"
)

// HMAC is an hmac secret: a key and a recipe. The broker puts in Header
// Prefix followed by the HMAC of the body, or of the canonical string
//
//	METHOD "\n" PATH[?QUERY] "\n" TIMESTAMP "\n" BODY
//
// where TIMESTAMP is the Unix time in seconds, sent in TimestampHeader.
type HMAC struct {
	Key string `json:"key"`
	// Header is the header the signature goes in.
	Header string `json:"header"`
	// Algorithm is sha256 (the default), sha512 or sha1.
	Algorithm string `json:"algorithm,omitempty"`
	// Signs is "body" (the default) or "canonical", the member "sign".
	Signs string `json:"sign,omitempty"`
	// Encoding is hex (the default) or base64.
	Encoding string `json:"encoding,omitempty"`
	// Prefix goes before the signature, as "sha256=".
	Prefix string `json:"prefix,omitempty"`
	// TimestampHeader carries the timestamp of a canonical signature;
	// "" means X-Timestamp.
	TimestampHeader string `json:"timestamp_header,omitempty"`
}

// Kind is "hmac".
func (h *HMAC) Kind() string { return KindHMAC }

// Secrets is the key.
func (h *HMAC) Secrets() []string { return []string{h.Key} }

// canonicalLife is how long a canonical signature is taken to work: its
// host judges its timestamp, and hosts commonly take five minutes; an
// hour is more than any does.
const canonicalLife = time.Hour

// Life is zero for a signature of the body alone, which has no time in
// it and works for ever, and canonicalLife for a canonical one.
func (h *HMAC) Life() time.Duration {
	if h.Signs == SignCanonical {
		return canonicalLife
	}
	return 0
}

// Unsigned is false: every body is signed.
func (h *HMAC) Unsigned() bool { return false }

// Drop is the signature's header and the timestamp's.
func (h *HMAC) Drop() []string {
	d := []string{h.Header}
	if h.Signs == SignCanonical {
		d = append(d, h.TimestampHeader)
	}
	return d
}

func (h *HMAC) validate() error {
	const k = KindHMAC
	f := fields{kind: k}
	f.check(required(k, "key", h.Key))
	f.want(len(h.Key) >= 16, "key", "is shorter than 16 bytes")
	f.check(required(k, "header", h.Header))
	f.check(headerName(k, "header", &h.Header))
	f.check(oneOf(k, "algorithm", &h.Algorithm, "sha256", "sha256", "sha512", "sha1"))
	f.check(oneOf(k, "sign", &h.Signs, SignBody, SignBody, SignCanonical))
	f.check(oneOf(k, "encoding", &h.Encoding, "hex", "hex", "base64"))
	f.check(headerSafe(k, "prefix", h.Prefix))
	if h.TimestampHeader == "" {
		h.TimestampHeader = "X-Timestamp"
	}
	f.check(headerName(k, "timestamp_header", &h.TimestampHeader))
	return f.err
}

func (h *HMAC) newHash() func() hash.Hash {
	switch h.Algorithm {
	case "sha512":
		return sha512.New
	case "sha1":
		return sha1.New
	}
	return sha256.New
}

// Canonical is the string a canonical recipe signs.
func Canonical(method, pathQuery, timestamp string, body []byte) []byte {
	b := []byte(method + "\n" + pathQuery + "\n" + timestamp + "\n")
	return append(b, body...)
}

// Sign puts the signature in its header.
func (h *HMAC) Sign(_ context.Context, req *http.Request, body []byte, _ bool, now time.Time) ([]string, error) {
	mac := hmac.New(h.newHash(), []byte(h.Key))
	if h.Signs == SignCanonical {
		ts := strconv.FormatInt(now.Unix(), 10)
		req.Header.Set(h.TimestampHeader, ts)
		pq := req.URL.EscapedPath()
		if req.URL.RawQuery != "" {
			pq += "?" + req.URL.RawQuery
		}
		mac.Write(Canonical(req.Method, pq, ts, body))
	} else {
		mac.Write(body)
	}
	sum := mac.Sum(nil)
	sig := hex.EncodeToString(sum)
	if h.Encoding == "base64" {
		sig = base64.StdEncoding.EncodeToString(sum)
	}
	req.Header.Set(h.Header, h.Prefix+sig)
	return []string{sig}, nil
}
