package quiet

import "net/http"

// MaxAnswerHeader bounds the header of an answer to any of the broker's
// outbound clients (an http.Transport's MaxResponseHeaderBytes): an
// upstream, a token endpoint, an identity provider or an operator's
// channel that sends more (an endless header line, say) is an error, and
// the broker holds no more of it than this. Go's own bound is 10 MiB.
const MaxAnswerHeader = 64 << 10

// Bodies returns a RoundTripper that sends each request with next and
// makes the body of its answer fail once read past max bytes
// (http.MaxBytesReader): for a library that reads an answer whole before
// it decodes it, so that a peer answering without end is not held.
func Bodies(next http.RoundTripper, max int64) http.RoundTripper {
	return bodies{next: next, max: max}
}

type bodies struct {
	next http.RoundTripper
	max  int64
}

func (b bodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = http.MaxBytesReader(nil, resp.Body, b.max)
	}
	return resp, err
}
