package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/httptoken"
)

// readSimpleResponse reads an answer from br when its whole head is
// already buffered and its framing is plain: HTTP/1.1, a final status,
// a single Content-Length (or a status or method that has no body), no
// Transfer-Encoding, no folded or malformed line. It returns nil, having
// read nothing, for any other answer, which http.ReadResponse then reads
// as the standard transport would. The head is kept as one string that
// the header values are cut from, so a short answer costs few
// allocations.
func readSimpleResponse(br *bufio.Reader, req *http.Request) *http.Response {
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return nil
	}
	head := string(buf[:end+2]) // every line with its CRLF
	line, rest, _ := strings.Cut(head, "\r\n")
	// HTTP/1.1 SP 3DIGIT SP reason
	if len(line) < 12 || line[:9] != "HTTP/1.1 " || (len(line) > 12 && line[12] != ' ') || !validHeaderValue(line) {
		return nil
	}
	code, ok := threeDigits(line[9:12])
	if !ok || code < 200 {
		return nil
	}
	status := line[9:]
	n := strings.Count(rest, "\r\n")
	h := make(http.Header, n)
	// Every value in one backing array, as textproto does.
	values := make([]string, 0, n)
	length := int64(-1)
	closeConn := false
	for rest != "" {
		line, rest, _ = strings.Cut(rest, "\r\n")
		colon := strings.IndexByte(line, ':')
		if colon <= 0 {
			return nil // no name, or a folded line
		}
		name := line[:colon]
		if !httptoken.Valid(name) {
			return nil
		}
		value := trimOWS(line[colon+1:])
		if !validHeaderValue(value) {
			return nil
		}
		key := canonicalKey(name)
		switch key {
		case "Transfer-Encoding", "Trailer":
			return nil
		case "Content-Length":
			v, err := strconv.ParseInt(value, 10, 64)
			if err != nil || v < 0 || value[0] == '+' || (length >= 0 && v != length) {
				return nil
			}
			if length >= 0 {
				continue // the same length again: kept once, as the standard reader does
			}
			length = v
		case "Connection":
			if httptoken.Listed(value, "close") {
				closeConn = true
			}
		}
		if vs, ok := h[key]; ok {
			h[key] = append(vs, value)
			continue
		}
		values = append(values, value)
		h[key] = values[len(values)-1 : len(values) : len(values)]
	}
	if closeConn {
		delete(h, "Connection") // as the standard reader does
	}
	noBody := req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	declared := length
	if noBody {
		length = 0
	} else if length < 0 {
		return nil // read to the connection's end: the standard reader's
	}
	if _, err := br.Discard(end + 4); err != nil {
		return nil
	}
	resp := &http.Response{
		Status:        status,
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: length,
		Close:         closeConn,
		Request:       req,
	}
	if noBody {
		resp.Body = http.NoBody
		if req.Method == http.MethodHead {
			resp.ContentLength = declared // -1 when the head names none
		}
	} else {
		resp.Body = &lengthBody{br: br, left: length}
	}
	return resp
}

func threeDigits(s string) (int, bool) {
	n := 0
	for i := 0; i < 3; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// canonicalKey is name in canonical form, without a copy when it is
// already canonical.
func canonicalKey(name string) string {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return http.CanonicalHeaderKey(name)
		}
		upper = c == '-'
	}
	return name
}

// lengthBody is a body of a known length read from br: io.EOF once it
// is all read (with its last bytes), io.ErrUnexpectedEOF if the
// connection ends before.
type lengthBody struct {
	br   *bufio.Reader
	left int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	if b.left == 0 {
		return n, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return nil }
