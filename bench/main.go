// Command bench measures boxbroker against the direct path to its
// upstream and against nginx doing the same job, in one run, on loopback.
//
// Run it from the repository's root:
//
//	go run ./bench            # the whole run, about five minutes
//	go run ./bench -quick     # a short run, to see that it works
//
// It builds ./cmd/boxbroker, starts a stand-in Anthropic upstream (in its
// own process), boxbroker on a temporary SQLite store with a box whose
// report allows agent and one whose report does not, and nginx as a plain
// proxy_pass reverse proxy injecting a fixed x-api-key (skipped, with a
// note, when nginx is not installed). It drives each path with the same
// load from a Go load generator and prints requests/s, latency, the
// proxy's CPU per 10k requests and peak RSS, the ratios against the
// direct path and nginx, and the memory each idle SSE stream holds. Every
// phase is bounded in count and time; the harness stops by itself and ends
// every process it started.
//
// docs/performance.md explains the cases and the figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the harness's flags.
type options struct {
	duration, latency, warm time.Duration
	rounds                  int
	events                  int
	ping, hold              time.Duration
	streams                 string
	parallelOpen            int
	boxbroker               string
	noNginx                 bool
	floor                   bool
	cases                   string
	brokerLog               string
	upstreamIP, brokerIP    string
	nginxIP, floorIP        string
	quick                   bool
	keep                    bool

	// set while running
	credential, token, refusedToken string
	egressSecret, egressHost        string
	idleTokens                      []string
	certFile                        string
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-role" {
		run := map[string]func([]string) error{"upstream": runUpstream, "floor": runFloor}[os.Args[2]]
		if run == nil {
			fmt.Fprintln(os.Stderr, "bench: no role", os.Args[2])
			os.Exit(2)
		}
		if err := run(os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, os.Args[2]+":", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "rounds per case; each figure is the median over them")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "throughput phase per case, path and round")
	flag.DurationVar(&o.latency, "latency", 3*time.Second, "latency phase (fixed rate) per case, path and round")
	flag.DurationVar(&o.warm, "warm", time.Second, "warm-up before each throughput phase")
	flag.IntVar(&o.events, "events", 20, "events in a streamed answer")
	flag.DurationVar(&o.ping, "ping", 3*time.Second, "ping interval of an idle stream")
	flag.DurationVar(&o.hold, "hold", 8*time.Second, "how long idle streams are held (at least two pings)")
	flag.StringVar(&o.streams, "streams", "1000,10000", "numbers of simultaneous idle streams to hold")
	flag.IntVar(&o.parallelOpen, "open-parallel", 100, "idle streams being opened at once")
	flag.StringVar(&o.boxbroker, "boxbroker", "", "a boxbroker binary (default: go build ./cmd/boxbroker)")
	flag.BoolVar(&o.noNginx, "no-nginx", false, "skip nginx")
	flag.BoolVar(&o.floor, "floor", false, "add the floor path: boxbroker's own HTTP server and transport with only nginx's work (the key checked, the credential injected)")
	flag.StringVar(&o.floorIP, "floor-ip", "127.0.0.5", "loopback address of the floor path")
	flag.StringVar(&o.cases, "cases", "small,sse,1mb,403,egress,decide", "cases to run, in order (none for only the idle streams)")
	flag.StringVar(&o.brokerLog, "broker-log", "info", "boxbroker's log level (its log goes to a file, as nginx's access log does)")
	flag.StringVar(&o.upstreamIP, "upstream-ip", "127.0.0.2", "loopback address of the stand-in upstream")
	flag.StringVar(&o.brokerIP, "broker-ip", "127.0.0.3", "loopback address of boxbroker")
	flag.StringVar(&o.nginxIP, "nginx-ip", "127.0.0.4", "loopback address of nginx")
	flag.BoolVar(&o.quick, "quick", false, "short phases and 1000 streams only")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (logs, nginx.conf, the store) and print its path")
	flag.Parse()
	if o.quick {
		o.duration, o.latency, o.warm, o.rounds = 2*time.Second, 2*time.Second, 500*time.Millisecond, 1
		o.streams, o.hold, o.ping = "1000", 3*time.Second, time.Second
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, &o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o *options) error {
	nofile := raiseNoFile()
	dir, err := os.MkdirTemp("", "boxbroker-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		defer fmt.Println("kept:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	o.credential = "sk-ant-api03-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	o.egressSecret = "ghp_bench" + strconv.FormatInt(time.Now().UnixNano(), 36)

	fmt.Printf("boxbroker bench: %d CPUs, %s, load average %s at start, open files limit %d\n",
		runtime.NumCPU(), runtime.Version(), loadavg(), nofile)
	bin := o.boxbroker
	if bin == "" {
		fmt.Println("building ./cmd/boxbroker ...")
		if bin, err = buildBroker(ctx, dir); err != nil {
			return err
		}
	}
	var children []*child
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			children[i].stop()
		}
	}()
	up, plain, tlsAddr, err := startUpstream(ctx, dir, o)
	if err != nil {
		return err
	}
	children = append(children, up)
	o.egressHost = "http://" + plain + "/egress-api"
	direct := &path{name: "direct", base: "http://" + plain, key: o.credential,
		refusedKey: o.credential, refuseURL: "http://" + plain + "/refuse",
		egressURL: o.egressHost + "/repos/octocat/hello-world", egressKey: o.egressSecret}

	dataDir := dir + "/data"
	bb, bpath, err := startBroker(ctx, bin, dataDir, o.brokerIP, "http://"+plain, o, nil, "h1")
	if err != nil {
		return err
	}
	children = append(children, bb)
	bpath.name = "boxbroker"

	paths := []*path{direct}
	var npath *path
	if o.noNginx {
		npath = &path{name: "nginx", note: "skipped (-no-nginx)"}
	} else {
		ng, np, err := startNginx(ctx, mkdir(dir+"/nginx"), o.nginxIP, plain, o)
		switch {
		case errors.Is(err, errNoNginx):
			npath = &path{name: "nginx", note: err.Error()}
		case err != nil:
			return err
		default:
			children = append(children, ng)
			npath = np
			npath.name = "nginx"
			paths = append(paths, npath)
		}
	}
	paths = append(paths, bpath)
	if npath.note != "" {
		fmt.Println("nginx:", npath.note)
	}

	// Idle streams first, on fresh processes, so memory freed by earlier
	// phases cannot hide what the streams hold.
	var held []streamsResult
	counts := parseCounts(o.streams)
	small := &benchCase{name: "warm", body: smallBody(), conc: 4}
	for _, p := range paths[1:] {
		var r result
		throughput(ctx, p, small, 500*time.Millisecond, 200*time.Millisecond, o.events, &r)
		base := p.proc.rss()
		for _, n := range counts {
			if need := 2*n + 64; need > int(nofile) && !p.proc.children {
				held = append(held, streamsResult{path: p.name + " (HTTP/1.1 upstream)", n: n,
					failed: fmt.Sprintf("skipped: a single process needs 2 descriptors a stream (%d), over the hard limit of %d open files here", need, nofile)})
				continue
			}
			fmt.Printf("holding %d idle streams via %s ...\n", n, p.name)
			r := holdStreams(ctx, p, n, o.parallelOpen, o.hold, base)
			r.path = p.name + " (HTTP/1.1 upstream)"
			held = append(held, r)
		}
	}
	// boxbroker reaching an HTTPS upstream, as it reaches the Anthropic
	// API: HTTP/2 multiplexes the streams onto a few connections.
	h2, h2path, err := startBroker(ctx, bin, dataDir, o.brokerIP, "https://"+tlsAddr, o, []string{"SSL_CERT_FILE=" + o.certFile}, "h2")
	if err != nil {
		return err
	}
	{
		var r result
		throughput(ctx, h2path, small, 500*time.Millisecond, 200*time.Millisecond, o.events, &r)
		base := h2path.proc.rss()
		for _, n := range counts {
			fmt.Printf("holding %d idle streams via boxbroker, HTTPS upstream ...\n", n)
			r := holdStreams(ctx, h2path, n, o.parallelOpen, o.hold, base)
			r.path = "boxbroker (HTTP/2 upstream)"
			held = append(held, r)
		}
	}
	h2.stop()

	// The floor measures per-call work, so it joins the cases only, not
	// the idle streams.
	if o.floor {
		fl, fp, err := startFloor(ctx, o.floorIP, plain, o)
		if err != nil {
			return err
		}
		children = append(children, fl)
		fp.name = "floor"
		paths = append(paths, fp)
	}

	// Each case runs in rounds, the paths taking turns within a round, and
	// each figure is the median over the rounds: load from outside the
	// run then falls on every path alike rather than on whichever ran
	// when it came.
	var results []result
	for _, name := range strings.Split(o.cases, ",") {
		if name == "none" {
			break
		}
		c := caseNamed(name)
		if c == nil {
			return fmt.Errorf("no case %q (small, sse, 1mb, 403, egress, decide)", name)
		}
		rounds := make([][]result, len(paths))
		for round := 0; round < o.rounds; round++ {
			fmt.Printf("%s, round %d of %d ...\n", c.name, round+1, o.rounds)
			rs := make([]*result, len(paths))
			for i, p := range paths {
				rs[i] = &result{path: p.name, cas: c.name}
				warm := o.warm
				if round > 0 {
					warm = 0
				}
				throughput(ctx, p, c, o.duration, warm, o.events, rs[i])
			}
			latency(ctx, paths, c, o.latency, o.events, rs)
			for i, p := range paths {
				if p.proc.pid != 0 {
					rs[i].peakRSS = p.proc.peak()
				}
				rounds[i] = append(rounds[i], *rs[i])
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		for i := range paths {
			results = append(results, medianOf(rounds[i]))
		}
	}
	fmt.Println()
	printResults(os.Stdout, results, held, npath.note, o)
	fmt.Printf("\nload average at end: %s\n", loadavg())
	return nil
}

// caseNamed returns the case by name, with its load.
func caseNamed(name string) *benchCase {
	switch strings.TrimSpace(name) {
	case "small":
		return &benchCase{name: "small", body: smallBody(), conc: 32, rate: 500}
	case "sse":
		return &benchCase{name: "sse", body: []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`), sse: true, conc: 16, rate: 200}
	case "1mb":
		return &benchCase{name: "1mb", body: bigBody(1 << 20), conc: 4, rate: 30}
	case "403":
		return &benchCase{name: "403", body: smallBody(), refused: true, conc: 32, rate: 500}
	case "egress":
		return &benchCase{name: "egress", kind: kindEgress, conc: 32, rate: 500}
	case "decide":
		return &benchCase{name: "decide", kind: kindDecide, body: []byte(decideQuestionBody), fanout: 4,
			decideBody: []byte(decideRequest), conc: 8, rate: 50}
	}
	return nil
}

// decideRequest is decide with four questions, two of each type the
// stand-in answers.
const decideRequest = `{"model":"claude-sonnet-4-5","state":{"order":{"items":3,"weight_kg":1.2,"address":"12 Rue de Rivoli, Paris"}},"questions":{` +
	`"ok":{"type":"noul","instructions":"Is the order complete?","criteria":{}},` +
	`"paid":{"type":"noul","instructions":"Has the order been paid for?","criteria":{}},` +
	`"care":{"type":"score","instructions":"Score how fragile it is, 1 to 5.","criteria":{"1":"sturdy","5":"glass"}},` +
	`"rush":{"type":"score","instructions":"Score how urgent it is, 1 to 5.","criteria":{"1":"whenever","5":"today"}}}}`

// decideQuestionBody is one question as a Messages call with structured
// output, of the size decide sends: what a box without decide would send
// for each question itself.
const decideQuestionBody = `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"You answer one question about a state, as the schema asks. Say why first.",` +
	`"messages":[{"role":"user","content":"<instructions>\nScore how fragile it is, 1 to 5.\n</instructions>\n<criteria>\n{\n  \"1\": \"sturdy\",\n  \"5\": \"glass\"\n}\n</criteria>\n<state>\n{\n  \"order\": {\n    \"items\": 3,\n    \"weight_kg\": 1.2\n  }\n}\n</state>"}],` +
	`"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"reason":{"type":"string"},"score":{"type":"number","description":"1 to 5"},"confidence":{"type":"number","description":"0 to 1"}},"required":["reason","score","confidence"],"additionalProperties":false}}}}`

func smallBody() []byte {
	return []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Hello, Claude. What is the capital of France?"}]}`)
}

// bigBody is a Messages request of n bytes: one long user message.
func bigBody(n int) []byte {
	head := `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"`
	tail := `"}]}`
	return []byte(head + strings.Repeat("lorem ipsum ", (n-len(head)-len(tail))/12+1)[:n-len(head)-len(tail)] + tail)
}

func parseCounts(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func mkdir(d string) string {
	_ = os.MkdirAll(d, 0o700)
	return d
}

// raiseNoFile raises the open-files limit to its hard limit (children
// inherit it) and returns it.
func raiseNoFile() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	lim.Cur = lim.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return lim.Cur
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
