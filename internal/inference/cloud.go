package inference

import (
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/proxy"
)

// target points out at path and query of paid's upstream (upstream when
// it names none) with paid's credential in its header. A cloud
// credential (cloud.Is) goes in no header: cloudTransport signs the call
// it makes in the cloud's form.
func target(out *http.Request, paid capability.Paid, upstream *url.URL, path, query string) {
	if !cloud.Is(paid.Credential) {
		proxy.SetAnthropicCredential(out.Header, paid.Credential)
	}
	if paid.Upstream != nil {
		upstream = paid.Upstream
	}
	proxy.Target(out, upstream, path, query)
}

// CloudTransport returns the transport that makes a call of this
// capability paid with a cloud credential (cloud.Is) through the cloud
// (Amazon Bedrock, Google Vertex AI), in the cloud's form over base, and
// answers in the Anthropic API's form; any other request goes to base as
// it is. It reads the call's credential from the request's context,
// which the failover points at the entry being tried. The server puts it
// beneath the spend meter's transport (Config.CloudBeneath), so that the
// meter reads the translated answer's usage. The cloud's requests (to
// the account's endpoint, its sts_endpoint, its service account's
// token_uri) go to base through proxy.ReachOnly: a proxy.NewTransport
// connects for them only where egress would reach a secret's host of
// that name. log is where the cloud client tells what it does of note
// (nil: slog.Default()).
func CloudTransport(base http.RoundTripper, log *slog.Logger) http.RoundTripper {
	return &cloudTransport{base: base, client: &cloud.Client{Transport: proxy.ReachOnly(base), Log: log}}
}

// cloudTransport is CloudTransport's.
type cloudTransport struct {
	base   http.RoundTripper
	client *cloud.Client
}

func (t *cloudTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pf, _ := req.Context().Value(ctxKey{}).(*paidFor)
	if pf == nil || !cloud.Is(pf.paid.Credential) {
		return t.base.RoundTrip(req)
	}
	cred, err := cloud.Parse(pf.paid.Credential)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		// The body is bounded by MaxBody (and scrubbed of tokens): the
		// cloud's form is made from it whole, and a Bedrock call is
		// signed over it.
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	call := cloud.Call{Method: req.Method, Path: pf.path, Beta: req.Header.Values("Anthropic-Beta"), Body: body}
	resp, err := t.client.Do(req.Context(), cred, call, func(v string) { pf.made = append(pf.made, v) })
	if err != nil {
		return nil, err
	}
	resp.Request = req
	// What the call was made with (the credential's keys, a signature,
	// an access token) is masked here, beneath every reader of the
	// answer: the spend meter keeps the answer's model in usage rows,
	// and a cloud endpoint could name one of them as the model.
	if secrets := cloudSecrets(pf.paid.Credential, pf.made); len(secrets) > 0 && resp.Body != nil && resp.Body != http.NoBody {
		r := proxy.NewFormSet(proxy.Masked(secrets...)).Redactor(resp.Body)
		if proxy.IsEventStream(resp.Header) {
			r.PassEvents()
		}
		resp.Body = r
	}
	return resp, nil
}

// CloseIdleConnections passes on to the wrapped transport.
func (t *cloudTransport) CloseIdleConnections() { closeIdle(t.base) }

// closeIdle closes rt's idle connections, when it keeps any.
func closeIdle(rt http.RoundTripper) {
	if ci, ok := rt.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// cloudSecrets are the values of a cloud credential cred, and those made
// for the call (on any entry it was tried on, cloud or not: after a
// failover from a cloud entry, the values made for that attempt), that
// must not reach the box.
func cloudSecrets(cred []byte, made []string) []string {
	var out []string
	if cloud.Is(cred) {
		if c, err := cloud.Parse(cred); err == nil {
			out = append(out, c.Secrets()...)
		}
	}
	out = append(out, made...)
	return slices.DeleteFunc(out, func(v string) bool { return v == "" })
}

// maskForms are the forms an answer is redacted of: the credential, each
// of secrets (cloudSecrets) and each of the earlier credentials the call
// was made on (and their cloud secrets: earlierValues), each as written
// or JSON- or percent-escaped (a box's JSON decoder or URL parser turns
// either back into the value), each masked with as many asterisks as it
// spans, so that the answer keeps its length.
func maskForms(cred []byte, secrets []string, earlier [][]byte) []proxy.Form {
	return append(proxy.Masked(cred), proxy.Masked(slices.Concat(secrets, earlierValues(earlier))...)...)
}

// earlierValues are the values of the earlier credentials a call was
// made on that no answer may carry: each credential, and a cloud
// account's secrets.
func earlierValues(earlier [][]byte) []string {
	var out []string
	for _, c := range earlier {
		out = append(out, string(c))
		out = append(out, cloudSecrets(c, nil)...)
	}
	return out
}
