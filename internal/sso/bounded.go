package sso

import (
	"errors"
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

// quoted is err with its text cut to maxQuoted bytes (quiet.Cut),
// wrapping err still.
func quoted(err error) error { return quiet.Reword(err, quiet.Cut(err.Error(), maxQuoted)) }

// redirectGET follows a redirect only of a GET, and only to https (or
// http on a loopback host): the discovery document and the keys, which
// carry nothing secret and are checked whatever address serves them
// (the document's issuer must be the one configured, the keys only
// verify signatures). The code exchange, a POST holding the code, the
// PKCE verifier and the client's secret, is never sent on: a 307 from
// the token endpoint (or whoever answers at its address) would post them
// again to an address of its choosing. Its 3xx is the provider's failure.
func redirectGET(req *http.Request, via []*http.Request) error {
	if via[0].Method != http.MethodGet || quiet.InClear(req.URL) {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}
