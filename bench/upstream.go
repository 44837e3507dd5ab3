package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The stand-in upstream runs in its own process (the harness starts its
// own binary again with -role upstream), so its CPU is not the load
// generator's and the proxies reach it over real sockets.

// upstreamConfig is what the stand-in needs.
type upstreamConfig struct {
	listenH2, listenH1 string
	cert, key          string
	credential         string
	egressSecret       string
	events             int
	gap                time.Duration
	ping               time.Duration
	maxHold            time.Duration
}

// smallAnswer is a Messages answer of the usual size.
const smallAnswer = `{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello from the stand-in."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":6}}`

// structuredAnswer answers a structured-output request (as decide asks a
// noul or a score question) with JSON that is both.
const structuredAnswer = `{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"{\"reason\":\"The order lists every item.\",\"noul\":0.92,\"score\":3,\"confidence\":0.8}"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":310,"output_tokens":24}}`

// egressAnswer is a third-party API's answer to a GET, of the usual size.
const egressAnswer = `{"id":1296269,"name":"hello-world","full_name":"octocat/hello-world","private":false,"owner":{"login":"octocat","id":1,"type":"User"},"description":"This your first repo!","fork":false,"created_at":"2011-01-26T19:01:12Z","updated_at":"2011-01-26T19:14:43Z","pushed_at":"2011-01-26T19:06:43Z","size":108,"stargazers_count":80,"watchers_count":80,"language":"Go","forks_count":9,"open_issues_count":0,"default_branch":"main"}`

// refusalAnswer is what the stand-in answers on /refuse: the direct
// path's 403, to compare a proxy's refusal with.
const refusalAnswer = `{"type":"error","error":{"type":"permission_error","message":"This box's inference capability does not list agent in its scope."}}` + "\n"

// sseEvent is one event of a Messages stream.
func sseEvent(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

// streamEvents is a Messages stream of n events (n >= 4): start, block
// start, n-4 text deltas, block stop, message stop.
func streamEvents(n int) [][]byte {
	out := [][]byte{
		[]byte(sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`)),
		[]byte(sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)),
	}
	for i := 0; i < n-4; i++ {
		out = append(out, []byte(sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word `+strconv.Itoa(i)+` "}}`)))
	}
	out = append(out,
		[]byte(sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`)),
		[]byte(sseEvent("message_stop", `{"type":"message_stop"}`)))
	return out
}

var (
	pingEvent  = []byte(sseEvent("ping", `{"type": "ping"}`))
	markStream = []byte(`"stream":true`)
	markIdle   = []byte(`Hold this stream open.`)
	markSchema = []byte(`"output_config"`)
)

// upstreamHandler answers like the Anthropic Messages API, for one key.
func upstreamHandler(cfg upstreamConfig) http.Handler {
	events := streamEvents(cfg.events)
	answer := []byte(smallAnswer)
	refusal := []byte(refusalAnswer)
	structured := []byte(structuredAnswer)
	api := []byte(egressAnswer)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/egress-api/") {
			if r.Header.Get("Authorization") != "Bearer "+cfg.egressSecret {
				http.Error(w, "wrong secret", http.StatusUnauthorized)
				return
			}
			writeFixed(w, http.StatusOK, api)
			return
		}
		if r.URL.Path == "/refuse" {
			writeFixed(w, http.StatusForbidden, refusal)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if r.Header.Get("X-Api-Key") != cfg.credential {
			http.Error(w, "wrong key", http.StatusUnauthorized)
			return
		}
		// Read the whole body (a 1 MB one too), keeping its first bytes.
		var head [8 << 10]byte
		n, _ := io.ReadFull(r.Body, head[:])
		if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20)); err != nil {
			http.Error(w, "body", http.StatusBadRequest)
			return
		}
		body := head[:n]
		switch {
		case bytes.Contains(body, markIdle):
			holdStream(w, r, cfg, events[0])
		case bytes.Contains(body, markSchema):
			writeFixed(w, http.StatusOK, structured)
		case bytes.Contains(body, markStream):
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			f := w.(http.Flusher)
			for i, ev := range events {
				if i > 0 && cfg.gap > 0 {
					time.Sleep(cfg.gap)
				}
				if _, err := w.Write(ev); err != nil {
					return
				}
				f.Flush()
			}
		default:
			writeFixed(w, http.StatusOK, answer)
		}
	})
}

// writeFixed answers status with body, a JSON document of known length.
func writeFixed(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// holdStream starts a stream and sends a ping every cfg.ping until the
// client goes or maxHold passes.
func holdStream(w http.ResponseWriter, r *http.Request, cfg upstreamConfig, start []byte) {
	w.Header().Set("Content-Type", "text/event-stream")
	f := w.(http.Flusher)
	_, _ = w.Write(start)
	f.Flush()
	t := time.NewTicker(cfg.ping)
	defer t.Stop()
	end := time.NewTimer(cfg.maxHold)
	defer end.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-t.C:
			if _, err := w.Write(pingEvent); err != nil {
				return
			}
			f.Flush()
		}
	}
}

// runUpstream is the -role upstream process. It serves HTTPS on two
// addresses: -listen-h2 offers HTTP/2 and HTTP/1.1 (ALPN; a client that
// asks for neither gets HTTP/1.1), -listen-h1 offers HTTP/1.1 only. The
// credential and the egress secret come on stdin, one a line; it serves
// until SIGTERM or until its standard input closes (the harness went
// away).
func runUpstream(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	var cfg upstreamConfig
	fs.StringVar(&cfg.listenH2, "listen-h2", "127.0.0.2:0", "HTTPS address offering HTTP/2 and HTTP/1.1")
	fs.StringVar(&cfg.listenH1, "listen-h1", "127.0.0.2:0", "HTTPS address offering HTTP/1.1 only")
	fs.StringVar(&cfg.cert, "cert", "", "certificate file (PEM)")
	fs.StringVar(&cfg.key, "key", "", "key file (PEM)")
	fs.IntVar(&cfg.events, "events", 20, "events in a stream")
	fs.DurationVar(&cfg.gap, "gap", 0, "pause between a stream's events")
	fs.DurationVar(&cfg.ping, "ping", 3*time.Second, "ping interval of a held stream")
	fs.DurationVar(&cfg.maxHold, "max-hold", 5*time.Minute, "longest a held stream lasts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.events < 4 {
		cfg.events = 4
	}
	in := bufio.NewReader(os.Stdin)
	lines, err := readLines(in)
	if err != nil || len(lines) != 2 {
		return fmt.Errorf("stdin: %d lines, want the credential and the egress secret, one a line, then an empty line (%v)", len(lines), err)
	}
	cfg.credential, cfg.egressSecret = lines[0], lines[1]
	cert, err := tls.LoadX509KeyPair(cfg.cert, cfg.key)
	if err != nil {
		return err
	}
	h := upstreamHandler(cfg)
	var servers []*http.Server
	var addrs []string
	for _, l := range []struct {
		addr  string
		proto []string
	}{{cfg.listenH2, []string{"h2", "http/1.1"}}, {cfg.listenH1, []string{"http/1.1"}}} {
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: l.proto}}
		if len(l.proto) == 1 {
			// An empty, non-nil map turns HTTP/2 off.
			srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		}
		go func() { _ = srv.ServeTLS(ln, "", "") }()
		servers = append(servers, srv)
		addrs = append(addrs, ln.Addr().String())
	}
	fmt.Printf("LISTEN %s %s\n", addrs[0], addrs[1])
	serveUntilGone(in)
	for _, srv := range servers {
		srv.Close()
	}
	return nil
}

// readLines reads a role's stdin up to its first empty line: the lines
// startRole wrote, trimmed.
func readLines(in *bufio.Reader) ([]string, error) {
	var lines []string
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return lines, err
		}
		if line = strings.TrimSpace(line); line == "" {
			return lines, nil
		}
		lines = append(lines, line)
	}
}

// serveUntilGone returns on SIGTERM or an interrupt, or when in, the
// role's stdin that the harness holds open, closes: when the harness
// goes, so does the role.
func serveUntilGone(in io.Reader) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, in)
		stop()
	}()
	<-ctx.Done()
}
