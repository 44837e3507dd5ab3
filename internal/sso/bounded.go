package sso

import (
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

// bounded is a RoundTripper whose answers' bodies fail to read past
// maxAnswer bytes (http.MaxBytesReader, as cloud's token answers are
// bounded).
type bounded struct{ next http.RoundTripper }

func (b bounded) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = http.MaxBytesReader(nil, resp.Body, maxAnswer)
	}
	return resp, err
}

// quoted is err with its text cut to maxQuoted bytes (quiet.Cut),
// wrapping err still.
func quoted(err error) error { return quiet.Reword(err, quiet.Cut(err.Error(), maxQuoted)) }
