// Command bench measures boxbroker against the direct path to its
// upstream, nginx and Portkey's gateway doing the same job, in one run,
// on loopback, in production's shape: an HTTPS upstream (HTTP/2, or
// HTTP/1.1 for the small-h1 case), agent-sized request bodies, paced
// streams and thousands of idle ones.
//
// Run it from the repository's root:
//
//	go run ./bench            # the whole run
//	go run ./bench -quick     # every path and case, briefly (about two minutes)
//
// It builds ./cmd/boxbroker, makes a certificate authority for the run
// and starts a stand-in Anthropic upstream (its own binary again, with
// -role upstream) serving HTTPS with a certificate that authority
// signed. Then boxbroker on a temporary SQLite store, trusting the CA
// through SSL_CERT_FILE; nginx as a proxy_pass https:// reverse proxy
// injecting a fixed x-api-key (skipped, with a note, when nginx is not
// installed); and Portkey's gateway under node, trusting the CA through
// NODE_EXTRA_CA_CERTS (installed with npm into a cache directory outside
// the checkout; skipped, with a note, when that fails); and the floor, a
// bare httputil.ReverseProxy on boxbroker's own transport (the binary
// again, with -role floor), the least a proxy on boxbroker's HTTP stack
// does. It drives each
// path with the same load from a Go load generator and prints
// requests/s, latency added over direct at a moderate open-loop rate,
// the proxy's CPU per 10k requests and peak RSS, the ratios against the
// floor, nginx and Portkey, the memory each idle SSE stream holds, and whether
// boxbroker meets its targets. Every phase is bounded in count and time;
// the harness stops by itself and ends every process it started.
// Secrets reach children through stdin or the environment, never argv.
//
// docs/performance.md explains the cases and the figures.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
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
	gap                     time.Duration
	ping, hold              time.Duration
	streams                 string
	parallelOpen            int
	boxbroker               string
	noNginx, noPortkey      bool
	portkeyDir              string
	portkeyVersion          string
	cases                   string
	brokerLog               string
	upstreamIP, brokerIP    string
	nginxIP, portkeyIP      string
	floorIP                 string
	noFloor                 bool
	quick                   bool
	keep                    bool

	// set while running
	credential, token, refusedToken string
	egressSecret, egressHost        string
	idleTokens                      []string
	certs                           certFiles
	h2Addr                          string
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-role" {
		roles := map[string]func([]string) error{"upstream": runUpstream, "floor": runFloor}
		run, ok := roles[os.Args[2]]
		if !ok {
			fmt.Fprintln(os.Stderr, "bench: no role", os.Args[2])
			os.Exit(2)
		}
		if err := run(os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, os.Args[2]+":", err)
			os.Exit(1)
		}
		return
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "rounds per case; each figure is the median over them")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "throughput phase per case, path and round")
	flag.DurationVar(&o.latency, "latency", 3*time.Second, "latency phase (open loop) per case, path and round")
	flag.DurationVar(&o.warm, "warm", time.Second, "warm-up before each throughput phase")
	flag.IntVar(&o.events, "events", 20, "events in a streamed answer")
	flag.DurationVar(&o.gap, "gap", 25*time.Millisecond, "pause between a streamed answer's events (the sse case)")
	flag.DurationVar(&o.ping, "ping", 3*time.Second, "ping interval of an idle stream")
	flag.DurationVar(&o.hold, "hold", 8*time.Second, "how long idle streams are held (at least two pings)")
	flag.StringVar(&o.streams, "streams", "1000,10000", "numbers of simultaneous idle streams to hold (none for no idle streams)")
	flag.IntVar(&o.parallelOpen, "open-parallel", 100, "idle streams being opened at once")
	flag.StringVar(&o.boxbroker, "boxbroker", "", "a boxbroker binary (default: go build ./cmd/boxbroker)")
	flag.BoolVar(&o.noNginx, "no-nginx", false, "skip nginx")
	flag.BoolVar(&o.noPortkey, "no-portkey", false, "skip Portkey's gateway")
	flag.StringVar(&o.portkeyDir, "portkey-dir", filepath.Join(cache, "boxbroker-bench", "portkey"), "where npm installs Portkey's gateway (outside the checkout)")
	flag.StringVar(&o.portkeyVersion, "portkey-version", "1.15.2", "version of @portkey-ai/gateway to install")
	flag.StringVar(&o.cases, "cases", "small,small-h1,agent,1mb,sse,egress", "cases to run, in order (none for only the idle streams)")
	flag.StringVar(&o.brokerLog, "broker-log", "info", "boxbroker's log level (its log goes to a file, as nginx's access log does)")
	flag.StringVar(&o.upstreamIP, "upstream-ip", "127.0.0.2", "loopback address of the stand-in upstream")
	flag.StringVar(&o.brokerIP, "broker-ip", "127.0.0.3", "loopback address of boxbroker")
	flag.StringVar(&o.nginxIP, "nginx-ip", "127.0.0.4", "loopback address of nginx")
	flag.StringVar(&o.portkeyIP, "portkey-ip", "127.0.0.6", "loopback address of Portkey's gateway")
	flag.StringVar(&o.floorIP, "floor-ip", "127.0.0.5", "loopback address of the floor (a bare httputil.ReverseProxy)")
	flag.BoolVar(&o.noFloor, "no-floor", false, "skip the floor (a bare httputil.ReverseProxy on boxbroker's transport)")
	flag.BoolVar(&o.quick, "quick", false, "short phases, one round and 1000 idle streams: every path and case, in about two minutes")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (logs, nginx.conf, the store) and print its path")
	flag.Parse()
	if o.quick {
		o.duration, o.latency, o.warm, o.rounds = time.Second, time.Second, 300*time.Millisecond, 1
		o.streams, o.hold, o.ping = "1000", 2500*time.Millisecond, time.Second
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
	var cases []*benchCase
	for _, name := range strings.Split(o.cases, ",") {
		if name == "none" {
			break
		}
		c := caseNamed(name)
		if c == nil {
			return fmt.Errorf("no case %q (small, small-h1, agent, 1mb, sse, egress)", name)
		}
		cases = append(cases, c)
	}

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
	// keep keeps a started proxy's process, to stop it when the run ends.
	keep := func(c *child, p *path, err error) (*path, error) {
		if err != nil {
			return nil, err
		}
		children = append(children, c)
		return p, nil
	}
	up, h2Addr, h1Addr, err := startUpstream(ctx, dir, o)
	if err != nil {
		return err
	}
	children = append(children, up)
	o.h2Addr = h2Addr
	roots, err := rootsFrom(o.certs.ca)
	if err != nil {
		return err
	}
	o.egressHost = "https://" + h2Addr + "/egress-api"
	direct := &path{name: "direct", base: "https://" + h2Addr, key: o.credential,
		tls: &tls.Config{RootCAs: roots}, h2: true,
		egressURL: o.egressHost + "/repos/octocat/hello-world", egressKey: o.egressSecret}
	direct.h1 = &path{name: "direct", base: "https://" + h1Addr, key: o.credential, tls: &tls.Config{RootCAs: roots}}

	dataDir := dir + "/data"
	bpath, err := keep(startBroker(ctx, bin, dataDir, o.brokerIP, "https://"+h2Addr, o, "h2"))
	if err != nil {
		return err
	}

	paths := []*path{direct}
	var notes []string
	if o.noNginx {
		notes = append(notes, "nginx: skipped (-no-nginx)")
	} else {
		np, err := keep(startNginx(ctx, mkdir(dir+"/nginx"), o.nginxIP, h2Addr, o))
		switch {
		case errors.Is(err, errNoNginx):
			notes = append(notes, "nginx: "+err.Error())
		case err != nil:
			return err
		default:
			paths = append(paths, np)
		}
	}
	if o.noPortkey {
		notes = append(notes, "Portkey: skipped (-no-portkey)")
	} else {
		entry, err := installPortkey(ctx, o.portkeyDir, o.portkeyVersion)
		var pp *path
		if err == nil {
			pp, err = keep(startPortkey(ctx, entry, dir, o.portkeyIP, h2Addr, o))
		}
		if err != nil {
			notes = append(notes, "Portkey: "+err.Error()+"; its rows are skipped")
		} else {
			paths = append(paths, pp)
		}
	}
	var fpath *path
	if o.noFloor {
		notes = append(notes, "floor: skipped (-no-floor)")
	} else {
		if fpath, err = keep(startFloor(ctx, o.floorIP, "https://"+h2Addr, o)); err != nil {
			return err
		}
		paths = append(paths, fpath)
	}
	paths = append(paths, bpath)
	for _, n := range notes {
		fmt.Println(n)
	}

	// Idle streams first, on fresh processes, so memory freed by earlier
	// phases cannot hide what the streams hold.
	var held []streamsResult
	counts := parseCounts(o.streams)
	small := &benchCase{name: "warm", body: smallBody(), conc: 4}
	for _, p := range paths[1:] {
		if len(counts) == 0 {
			break
		}
		var r result
		throughput(ctx, p, small, 500*time.Millisecond, 200*time.Millisecond, o.events, &r)
		base := p.proc.rss()
		for _, n := range counts {
			if need := p.fdsPerStream*n + 64; need > int(nofile) && !p.proc.children {
				held = append(held, streamsResult{path: p.name, n: n,
					failed: fmt.Sprintf("skipped: one process needs %d descriptors a stream (%d), over the hard limit of %d open files here", p.fdsPerStream, need, nofile)})
				continue
			}
			fmt.Printf("holding %d idle streams via %s ...\n", n, p.name)
			r := holdStreams(ctx, p, n, o.parallelOpen, o.hold, base)
			r.path = p.name
			held = append(held, r)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}

	// boxbroker reaching the upstream over HTTP/1.1, for the cases that
	// ask for it: a second process on a copy of the store, against the
	// stand-in's HTTP/1.1-only address.
	if slices.ContainsFunc(cases, func(c *benchCase) bool { return c.h1 }) {
		if bpath.h1, err = keep(startBroker(ctx, bin, dataDir+"-copy", o.brokerIP, "https://"+h1Addr, o, "h1")); err != nil {
			return err
		}
		if fpath != nil {
			if fpath.h1, err = keep(startFloor(ctx, o.floorIP, "https://"+h1Addr, o)); err != nil {
				return err
			}
		}
	}

	// Each case runs in rounds, the paths taking turns within a round, and
	// each figure is the median over the rounds: load from outside the
	// run then falls on every path alike rather than on whichever ran
	// when it came.
	var results []result
	for _, c := range cases {
		cpaths := make([]*path, 0, len(paths))
		var skipped []result
		for _, p := range paths {
			switch {
			case c.kind == kindEgress && p.egressURL == "":
				skipped = append(skipped, result{path: p.name, cas: c.name, skipped: "no egress"})
			case c.h1 && p.h1 != nil:
				cpaths = append(cpaths, p.h1)
			default:
				cpaths = append(cpaths, p)
			}
		}
		rounds := make([][]result, len(cpaths))
		rate := 0.0
		for round := 0; round < o.rounds; round++ {
			fmt.Printf("%s, round %d of %d ...\n", c.name, round+1, o.rounds)
			rs := make([]*result, len(cpaths))
			for i, p := range cpaths {
				rs[i] = &result{path: p.name, cas: c.name}
				warm := o.warm
				if round > 0 {
					warm = 0
				}
				throughput(ctx, p, c, o.duration, warm, o.events, rs[i])
			}
			if round == 0 {
				rate = moderateRate(c, cpaths, rs)
			}
			latency(ctx, cpaths, c, rate, o.latency, o.events, rs)
			for i, p := range cpaths {
				rs[i].peakRSS = p.proc.peak()
				rounds[i] = append(rounds[i], *rs[i])
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		for i := range cpaths {
			results = append(results, medianOf(rounds[i]))
		}
		results = append(results, skipped...)
	}
	fmt.Println()
	printResults(os.Stdout, results, held, notes, o)
	fmt.Printf("\nload average at end: %s\n", loadavg())
	return nil
}

// moderateRate is the open-loop rate of a case's latency phase: c.rate,
// or half the slowest proxy's throughput in the first round where that is
// lower, so that every path is measured at a rate it sustains rather
// than at saturation.
func moderateRate(c *benchCase, paths []*path, rs []*result) float64 {
	rate := c.rate
	for i, p := range paths {
		if p.proc.pid != 0 && rs[i].rps > 0 {
			rate = min(rate, rs[i].rps/2)
		}
	}
	return max(rate, 2)
}

// caseNamed returns the case by name, with its load.
func caseNamed(name string) *benchCase {
	switch strings.TrimSpace(name) {
	case "small":
		return &benchCase{name: "small", body: smallBody(), conc: 32, rate: 1000}
	case "small-h1":
		return &benchCase{name: "small-h1", body: smallBody(), h1: true, conc: 32, rate: 1000}
	case "agent":
		return &benchCase{name: "agent", body: agentBody(200 << 10), conc: 8, rate: 200}
	case "1mb":
		return &benchCase{name: "1mb", body: agentBody(1 << 20), conc: 4, rate: 50}
	case "sse":
		// Paced: the stand-in pauses -gap between events, so a stream
		// lasts (events-1)×gap and many are open at once.
		return &benchCase{name: "sse", body: []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`), sse: true, conc: 64, rate: 100, workers: 512}
	case "egress":
		return &benchCase{name: "egress", kind: kindEgress, conc: 32, rate: 1000}
	}
	return nil
}

func smallBody() []byte {
	return []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Hello, Claude. What is the capital of France?"}]}`)
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
