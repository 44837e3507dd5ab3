package pool

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/secrets"
)

// probeVersion is the anthropic-version a probe is made with.
const probeVersion = "2023-06-01"

// errNoUpstream is a probe's error when the pool has no Upstream for an
// entry that names none.
var errNoUpstream = errors.New("the pool has no upstream URL for the entry")

// errCloudNotProbed is a probe's error for an entry that is a cloud
// account (Amazon Bedrock, Google Vertex AI).
var errCloudNotProbed = errors.New("the entry is a cloud account, which is not probed")

// check probes entry e's credential after it answered a call 401, and
// fails e for FailedFor when the probe is refused 401 too. A box chooses
// everything of its own call, and can draw a 401 from a sound key (a
// header, a beta, an organisation's setting); it chooses nothing of the
// probe. At most one probe of an entry runs at a time, and at most one
// begins in ProbeEvery, unless its value was set again since: a 401 that
// finds a probe under way or recent leaves the entry as it is.
func (p *Pool) check(e Entry) {
	now := p.cfg.Now()
	p.mu.Lock()
	h := p.healthLocked(e.Name)
	if h.probing || (!h.probedAt.IsZero() && now.Sub(h.probedAt) < ProbeEvery && !e.UpdatedAt.After(h.probedValue)) {
		p.mu.Unlock()
		return
	}
	h.probing, h.probedAt, h.probedValue = true, now, e.UpdatedAt
	p.mu.Unlock()

	status, err := p.probe(e)

	now = p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	h.probing = false
	switch {
	case err != nil:
		p.cfg.Logger.Warn("credential pool: an entry answered 401 and its probe failed; it stays as it was", "entry", e.Name, "err", err)
	case status == http.StatusUnauthorized:
		h.failed, h.failedValue, h.failedUntil = true, e.UpdatedAt, now.Add(FailedFor)
		p.cfg.Logger.Warn("credential pool: the upstream refused an entry's credential (401 to the broker's own GET /v1/models); it takes no calls on this replica until the time given",
			"entry", e.Name, "until", h.failedUntil.UTC().Format(time.RFC3339))
	default:
		p.cfg.Logger.Info("credential pool: an entry answered a call 401 but its credential is not refused; the call was at fault", "entry", e.Name, "probe_status", status)
	}
}

// probe asks the upstream of entry e for its model list with e's
// credential, within ProbeFor, and returns the answer's status.
func (p *Pool) probe(e Entry) (int, error) {
	cred, err := p.cfg.Keyring.Open(e.Sealed, AD(e.Name))
	if err != nil {
		return 0, err
	}
	defer secrets.Zero(cred)
	if cloud.Is(cred) {
		// A cloud account's credential never goes to the Anthropic
		// API; the broker maps none of a cloud's refusals to a 401.
		return 0, errCloudNotProbed
	}
	base, err := p.url(e.URL)
	if err != nil {
		return 0, err
	}
	if base == nil {
		return 0, errNoUpstream
	}
	ctx, cancel := context.WithTimeout(context.Background(), ProbeFor)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "", nil)
	if err != nil {
		return 0, err
	}
	proxy.Target(req, base, "/v1/models", "")
	req.Header.Set("Anthropic-Version", probeVersion)
	proxy.SetAnthropicCredential(req.Header, cred)
	// The transport itself, not a Client: no redirect is followed, so
	// the credential goes to the entry's host alone.
	resp, err := p.cfg.Transport.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}
