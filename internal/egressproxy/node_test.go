package egressproxy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeFetch is run by node: fetch through undici's ProxyAgent (the
// undici npm bundles, which is Node's own fetch's implementation), with
// everything it needs from the environment, so no token is in argv.
const nodeFetch = `
const { fetch, ProxyAgent } = require(process.env.UNDICI);
const fs = require('fs');
(async () => {
  const dispatcher = new ProxyAgent({ uri: process.env.PROXY, requestTls: { ca: fs.readFileSync(process.env.CA) } });
  try {
    const r = await fetch(process.env.URL, { dispatcher, headers: { authorization: 'Bearer ' + process.env.TOKEN } });
    const h = {};
    r.headers.forEach((v, k) => { h[k] = v; });
    console.log(JSON.stringify({ status: r.status, headers: h, body: await r.text() }));
  } catch (e) {
    console.log(JSON.stringify({ error: String(e && e.cause ? e.cause : e) }));
  }
  process.exit(0); // not waiting for the kept-alive connection to time out
})();
`

// nodeAgent is run by node: https.get through https-proxy-agent (the one
// npm bundles), which passes a refused CONNECT's answer to the client,
// as undici's fetch does not (it says only "Request was cancelled").
const nodeAgent = `
const { HttpsProxyAgent } = require(process.env.AGENT);
const https = require('https');
const fs = require('fs');
const agent = new HttpsProxyAgent(process.env.PROXY, { ca: fs.readFileSync(process.env.CA) });
https.get(process.env.URL, { agent, ca: fs.readFileSync(process.env.CA), headers: { authorization: 'Bearer ' + process.env.TOKEN } }, (r) => {
  let body = '';
  r.on('data', (d) => { body += d; });
  r.on('end', () => { console.log(JSON.stringify({ status: r.statusCode, headers: r.headers, body })); });
}).on('error', (e) => { console.log(JSON.stringify({ error: String(e) })); });
`

// undiciPaths are where an installed npm keeps its own undici.
var undiciPaths = []string{"/usr/lib/node_modules/npm/node_modules/undici", "/usr/local/lib/node_modules/npm/node_modules/undici"}

func TestProxy_NodeFetch(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Node fetch checks did not run")
	}
	undici := ""
	for _, p := range undiciPaths {
		if _, err := os.Stat(filepath.Join(p, "package.json")); err == nil {
			undici = p
		}
	}
	if undici == "" {
		t.Skip("no undici found beside npm (" + strings.Join(undiciPaths, ", ") + "): the Node fetch checks did not run")
	}
	f := newFixture(t)
	script := filepath.Join(t.TempDir(), "fetch.js")
	if err := os.WriteFile(script, []byte(nodeFetch), 0o600); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
		Error   string            `json:"error"`
	}
	agentScript := filepath.Join(t.TempDir(), "agent.js")
	if err := os.WriteFile(agentScript, []byte(nodeAgent), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(filepath.Dir(undici), "https-proxy-agent")
	if _, err := os.Stat(filepath.Join(agent, "package.json")); err != nil {
		t.Skip("no https-proxy-agent found beside npm's undici: the Node checks did not run")
	}
	runWith := func(script, tok, ca, url string) answer {
		cmd := exec.Command(node, script)
		cmd.Env = cleanEnv(t, "UNDICI="+undici, "AGENT="+agent, "PROXY="+f.proxyURL(tok).String(), "CA="+ca, "URL="+url, "TOKEN="+tok)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node: %v %s", err, out)
		}
		var a answer
		if err := json.Unmarshal(out, &a); err != nil {
			t.Fatalf("node printed %q: %v", out, err)
		}
		return a
	}
	run := func(tok, ca, url string) answer { return runWith(script, tok, ca, url) }
	a := run(f.token, f.caFile, "https://"+f.host+"/v1/echo")
	if a.Status != 200 {
		t.Fatalf("fetch through the proxy = %+v", a)
	}
	all, _ := json.Marshal(a)
	if strings.Contains(string(all), secretValue) || a.Headers["x-echo-authorization"] != "Bearer "+f.token {
		t.Errorf("the box's answer carries the value, or not the echoed token: %s", all)
	}
	if seen := f.up.all(); !strings.Contains(seen, "Bearer "+secretValue) || strings.Contains(seen, f.token) {
		t.Errorf("the host did not receive the value, or received the token:\n%s", seen)
	}
	if a := runWith(agentScript, f.token, f.caFile, "https://"+f.host+"/v1/echo"); a.Status != 200 || strings.Contains(a.Body, secretValue) {
		t.Errorf("https.get through https-proxy-agent = %+v, want 200 without the value", a)
	}
	if a := runWith(agentScript, f.token, f.caFile, "https://api.github.com/"); a.Status != 403 || !strings.Contains(a.Body, "egress") {
		t.Errorf("https.get from an undeclared host = %+v, want the CONNECT refused 403 naming egress", a)
	}
	if a := runWith(agentScript, wrongToken(f.token), f.caFile, "https://"+f.host+"/"); a.Status != 407 || a.Headers["proxy-authenticate"] == "" {
		t.Errorf("https.get with a wrong token = %+v, want 407 with Proxy-Authenticate", a)
	}
	if a := run(f.token, certFile(t, f.passCert), "https://"+f.passHost+"/"); a.Status != 200 || !strings.Contains(a.Body, "its own certificate") {
		t.Errorf("fetch from the passthrough host, trusting only its certificate = %+v", a)
	}
}
