package inference_test

import (
	"net/http/httptest"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cloud/cloudtest"
	"github.com/intentius/boxbroker/internal/server"
)

// cloudEnv is a broker whose shared credential is a cloud account, with
// the cloud's stand-in (cloudtest) on loopback TLS.
type cloudEnv struct {
	b        *brokertest.Broker
	token    string
	rec      *brokertest.Recorder
	bedrock  *cloudtest.Bedrock
	vertex   *cloudtest.Vertex
	cred     string // the credential's JSON as sealed
	secrets  []string
	upstream *httptest.Server
}

// newCloudBroker starts a cloud stand-in of kind ("bedrock" or "vertex")
// and a broker whose shared Anthropic credential is an account there;
// the broker's transport trusts the stand-in's certificate, as it would
// a real endpoint's, with verification on, and asks for no compression,
// as the server's does.
func newCloudBroker(t *testing.T, kind string) *cloudEnv {
	t.Helper()
	c := cloudtest.New(t, kind, nil)
	env := &cloudEnv{rec: c.Recorder, bedrock: c.Bedrock, vertex: c.Vertex, cred: c.Credential, secrets: c.Secrets, upstream: c.Server}
	sealed := checkCloud(t, kind, env.cred)
	tr := c.Transport()
	tr.DisableCompression = true // as proxy.NewTransport's, the server's
	env.b = brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.Transport = tr }})
	env.b.SetCredential("anthropic", sealed)
	env.token = env.b.AddBox("a")
	env.b.Report(env.token, brokertest.Entry("inference", "agent"))
	return env
}
