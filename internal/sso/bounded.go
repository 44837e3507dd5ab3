package sso

import (
	"fmt"
	"io"
	"net/http"

	"github.com/intentius/boxbroker/internal/quiet"
)

// maxAnswer bounds what is read of any answer from the provider: its
// discovery document, its keys (a few KiB each) and the token endpoint's
// answer, which oauth2 reads to 1 MiB too.
const maxAnswer = 1 << 20

// maxQuoted bounds what an error of Start or Finish quotes of what the
// provider answered: go-oidc quotes an answer's body whole in the error
// of a discovery or a key set it could not use, and the owner's page
// logs the error.
const maxQuoted = 1 << 10

// errAnswerTooLarge is the read error of an answer past maxAnswer.
var errAnswerTooLarge = fmt.Errorf("the identity provider's answer is over %d bytes", maxAnswer)

// bounded is a RoundTripper whose answers' bodies fail to read past
// maxAnswer bytes.
type bounded struct{ next http.RoundTripper }

func (b bounded) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &capped{ReadCloser: resp.Body, left: maxAnswer}
	return resp, nil
}

// capped is a body that fails with errAnswerTooLarge once more than left
// bytes would be read.
type capped struct {
	io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errAnswerTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.ReadCloser.Read(p)
	if int64(n) > c.left {
		n, c.left = int(c.left), -1
		return n, errAnswerTooLarge
	}
	c.left -= int64(n)
	return n, err
}

// quoted is err with its text cut to maxQuoted bytes (quiet.Cut),
// wrapping err still.
func quoted(err error) error { return quiet.Reword(err, quiet.Cut(err.Error(), maxQuoted)) }
