package proxy

import (
	"bufio"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestReadSimpleResponse_AgreesWithReadResponse reads each answer with
// the fast reader and with http.ReadResponse: where the fast reader
// takes an answer, both give the same status, headers, length, framing
// and body, and the same bytes are left for the next answer.
func TestReadSimpleResponse_AgreesWithReadResponse(t *testing.T) {
	next := "HTTP/1.1 204 No Content\r\n\r\n"
	cases := []struct {
		name, answer, method string
		fast                 bool
	}{
		{"json", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\nRequest-Id: req_1\r\n\r\n{\"ok\":true}", "POST", true},
		{"lower-case names", "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nx-a: 1\r\nX-a: 2\r\n\r\nhi", "GET", true},
		{"no reason", "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nhi", "GET", true},
		{"spaces", "HTTP/1.1 403 Forbidden\r\nContent-Length:   3  \r\nX-Empty:\r\n\r\nno!", "GET", true},
		{"close", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", "GET", true},
		{"head", "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", "HEAD", true},
		{"not modified", "HTTP/1.1 304 Not Modified\r\nEtag: x\r\n\r\n", "GET", true},
		{"same length twice", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi", "GET", true},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", "GET", false},
		{"chunked and length", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", "GET", false},
		{"no length", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", "GET", false},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi", "GET", false},
		{"signed length", "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nhi", "GET", false},
		{"folded", "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 2\r\n\r\nhi", "GET", false},
		{"space before colon", "HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 2\r\n\r\nhi", "GET", false},
		{"control byte", "HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nhi", "GET", false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", "GET", false},
		{"continue", "HTTP/1.1 100 Continue\r\n\r\n", "POST", false},
		{"bad status", "HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nhi", "GET", false},
		{"head cut short", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", "GET", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, "http://up/x", nil)
			in := c.answer + next
			br := bufio.NewReaderSize(strings.NewReader(in), 4096)
			br.Peek(1)
			got := readSimpleResponse(br, req)
			if (got != nil) != c.fast {
				t.Fatalf("fast reader took it: %v, want %v", got != nil, c.fast)
			}
			if got == nil {
				if br.Buffered() != len(in) {
					t.Fatal("the fast reader consumed an answer it did not take")
				}
				return
			}
			want, err := http.ReadResponse(bufio.NewReader(strings.NewReader(in)), req)
			if err != nil {
				t.Fatalf("http.ReadResponse: %v", err)
			}
			gb, gerr := io.ReadAll(got.Body)
			wb, _ := io.ReadAll(want.Body)
			if gerr != nil || string(gb) != string(wb) {
				t.Errorf("body %q (%v), want %q", gb, gerr, wb)
			}
			if got.StatusCode != want.StatusCode || got.Status != want.Status || got.ContentLength != want.ContentLength || got.Close != want.Close || got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor {
				t.Errorf("got %d %q len %d close %v, want %d %q len %d close %v", got.StatusCode, got.Status, got.ContentLength, got.Close, want.StatusCode, want.Status, want.ContentLength, want.Close)
			}
			if !reflect.DeepEqual(got.Header, want.Header) {
				t.Errorf("headers %q, want %q", got.Header, want.Header)
			}
			rest, _ := io.ReadAll(br)
			if string(rest) != next {
				t.Errorf("left %q for the next answer, want %q", rest, next)
			}
		})
	}
}

func TestLengthBody_CutShort(t *testing.T) {
	b := &lengthBody{br: bufio.NewReader(strings.NewReader("abc")), left: 5}
	got, err := io.ReadAll(b)
	if string(got) != "abc" || err != io.ErrUnexpectedEOF {
		t.Errorf("= %q, %v; want abc and io.ErrUnexpectedEOF", got, err)
	}
}

func FuzzReadSimpleResponse(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", "GET")
	f.Add("HTTP/1.1 204 No Content\r\nX: y\r\n\r\n", "HEAD")
	f.Add("HTTP/1.1 200 \n0\r\n\r\n", "GET") // a bare LF in the status line
	f.Fuzz(func(t *testing.T, answer, method string) {
		if method != "GET" && method != "HEAD" && method != "POST" {
			return
		}
		req, _ := http.NewRequest(method, "http://up/x", nil)
		br := bufio.NewReaderSize(strings.NewReader(answer), 4096)
		br.Peek(1)
		got := readSimpleResponse(br, req)
		if got == nil {
			return
		}
		want, err := http.ReadResponse(bufio.NewReader(strings.NewReader(answer)), req)
		if err != nil {
			t.Fatalf("fast reader took an answer http.ReadResponse refuses (%v): %q", err, answer)
		}
		gb, gerr := io.ReadAll(got.Body)
		wb, werr := io.ReadAll(want.Body)
		if got.StatusCode != want.StatusCode || got.ContentLength != want.ContentLength || string(gb) != string(wb) || (gerr == nil) != (werr == nil) {
			t.Fatalf("fast %d len %d body %q (%v); standard %d len %d body %q (%v)", got.StatusCode, got.ContentLength, gb, gerr, want.StatusCode, want.ContentLength, wb, werr)
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("headers %q, want %q", got.Header, want.Header)
		}
	})
}
