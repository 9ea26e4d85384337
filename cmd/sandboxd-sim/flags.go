package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// options are the parsed flags: the emulator's Config and what only the
// binary uses.
type options struct {
	cfg         sim.Config
	listen      string
	pools       string
	logLevel    slog.Level
	showVersion bool
}

const usageHead = `Usage: sandboxd-sim --token-file FILE [flags]

Serves the sandboxd wire protocol from an in-memory node. Every default is
the real sandboxd's behaviour; the flags marked "not real sandboxd" opt out.

Flags:
`

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("sandboxd-sim", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	c := &o.cfg
	var (
		tokenFile, logLevel, peers, peerTemplates string
		tenants                                   tenantFiles
		guestPorts                                guestPortFlags
	)
	fs.StringVar(&c.APIVersion, "api-version", sim.LatestAPI, "sandboxd API version to reproduce: "+strings.Join(sim.APIVersions(), ", "))
	fs.StringVar(&o.listen, "listen", "127.0.0.1:7777", "address to listen on (port 0 picks one; see the stdout line)")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the root api_token (required)")
	fs.Var(&tenants, "tenant-token-file", "tenant `name=path`: a file holding that tenant's token; repeatable")
	fs.IntVar(&c.TenantMaxClaims, "tenant-max-claims", 0, "cap on each tenant's live sandboxes (429 at the cap); 0 = unlimited")
	fs.BoolVar(&c.TenantDBDown, "tenant-db-down", false, "start with the tenant database down: non-root requests answer 503 with Retry-After")
	fs.DurationVar(&c.TenantDBRetryAfter, "tenant-db-retry-after", time.Second, "Retry-After of those 503s")
	fs.StringVar(&o.pools, "pools", "default=64", "warm pools: template[/net/size]=warm,... (net defaults to none, size to small)")
	fs.IntVar(&c.MaxClaims, "max-claims", 0, "cap on live sandboxes; 0 = unlimited")
	fs.BoolVar(&c.Draining, "draining", false, "start draining: every claim answers 429")
	fs.StringVar(&c.Capacity, "capacity", "", "answer of a node at --max-claims: 429 or redirect (default 429; redirect with --mesh)")
	fs.BoolVar(&c.Mesh, "mesh", false, "meshed node: a warm miss or a --peer-templates template is redirected unless the claim sets no_redirect")
	fs.StringVar(&peers, "peers", "10.0.0.9:7777", "comma-separated peer addresses of a redirect answer and of /v1/info peers")
	fs.StringVar(&peerTemplates, "peer-templates", "", "comma-separated templates a peer owns (redirected on a meshed node)")
	fs.StringVar(&c.OwnerAddrMode, "owner-addr-mode", sim.OwnerAddrIP, "node-wide owner_addr form: ip, origin, hostname, none, or per-claim (not real sandboxd)")
	fs.StringVar(&c.OwnerAddr, "owner-addr", "", "owner_addr verbatim (ip, origin and hostname modes); empty derives one")
	fs.StringVar(&c.AddrPrefix, "addr-prefix", "10.77.", "private range of the ip and per-claim owner addresses (never dialed)")
	fs.DurationVar(&c.DefaultTTL, "default-ttl", sim.DefaultTTL, "lease of a claim or renew with ttl_seconds 0")
	fs.DurationVar(&c.MaxTTL, "max-ttl", sim.MaxTTL, "cap on every lease; a longer ask is granted this")
	fs.DurationVar(&c.ClaimLatency, "claim-latency", 0, "latency of every claim before admission")
	fs.DurationVar(&c.ClaimJitter, "claim-jitter", 0, "uniform random extra claim latency in [0, jitter)")
	fs.DurationVar(&c.ProvisionLatency, "provision-latency", 0, "latency of every admitted claim before its VM exists")
	fs.DurationVar(&c.ColdLatency, "cold-latency", 20*time.Millisecond, "extra latency of a claim that finds its warm pool empty (negative = none)")
	fs.BoolVar(&c.FinishDetachedClaims, "finish-detached-claims", false, "finish a claim whose caller went away, as behind a proxy that hides the disconnect (by default it is cancelled and no VM is made)")
	fs.Float64Var(&c.LoseAnswerRate, "lose-answer-rate", 0, "share of claims whose VM is made but whose answer is never sent, in [0,1]")
	fs.Float64Var(&c.FailRate, "fail-rate", 0, "share of claims answered 500 provisioning failed, in [0,1]")
	fs.DurationVar(&c.RefillDelay, "refill-delay", 0, "time for a claimed warm VM to be replaced")
	fs.Var(&guestPorts, "guest-port", "guest `port=host:port`: the ports relay to that guest port dials this host address; repeatable")
	fs.BoolVar(&c.GuestLoopback, "guest-loopback", false, "guest port P that no --guest-port names is 127.0.0.1:P on the host")
	fs.Int64Var(&c.ExecMemory, "exec-memory", 256<<20, "bytes of buffered exec output the node holds; each running command takes 8 MiB, and one that finds too little is 503")
	fs.BoolVar(&c.NoAgentRelay, "no-agent-relay", false, "answer the agent relay (GET /v1/sandboxes/{id}/agent) 404, as a node without it")
	fs.IntVar(&c.AgentProto, "agent-proto", 2, "the proto silkd reports in info: 1 serves one RPC a connection, 2 serves them back to back")
	fs.BoolVar(&c.GuestHostShell, "guest-host-shell", false, "let silkd's pty_open (kubectl exec -t) run the HOST's shell in a scratch directory: whoever reaches the emulator gets a shell on this host")
	fs.BoolVar(&c.MetricsNoAuth, "metrics-no-auth", false, "serve /metrics without a token (not real sandboxd: it is root only)")
	fs.StringVar(&c.StatePath, "state", "", "optional JSON state file, so sandboxes survive a restart")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error (request lines are info)")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.showVersion {
		return o, nil
	}
	if err := o.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return o, fmt.Errorf("--log-level: %w", err)
	}
	if tokenFile == "" {
		return o, errors.New("--token-file is required")
	}
	var err error
	if c.RootToken, err = readToken(tokenFile); err != nil {
		return o, fmt.Errorf("--token-file: %w", err)
	}
	if c.TenantTokens, err = tenants.tokens(); err != nil {
		return o, fmt.Errorf("--tenant-token-file: %w", err)
	}
	if c.Pools, err = sim.ParsePools(o.pools); err != nil {
		return o, fmt.Errorf("--pools: %w", err)
	}
	c.GuestPorts = guestPorts.m
	c.Redirect = sim.ParseList(peers)
	c.PeerTemplates = sim.ParseList(peerTemplates)
	return o, nil
}

// tenantFiles collects --tenant-token-file name=path flags.
type tenantFiles []string

func (t *tenantFiles) String() string { return strings.Join(*t, ",") }

func (t *tenantFiles) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" {
		return fmt.Errorf("%q: want name=path", v)
	}
	*t = append(*t, v)
	return nil
}

// tokens reads every file into token→tenant name. One token for two
// tenants is an error: the requests of one would be billed to the other.
func (t tenantFiles) tokens() (map[string]string, error) {
	out := map[string]string{}
	for _, v := range t {
		name, path, _ := strings.Cut(v, "=")
		tok, err := readToken(path)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", name, err)
		}
		if other, dup := out[tok]; dup && other != name {
			return nil, fmt.Errorf("tenants %s and %s have the same token", other, name)
		}
		out[tok] = name
	}
	return out, nil
}

// guestPortFlags collects --guest-port port=host:port flags.
type guestPortFlags struct{ m map[int]string }

func (g *guestPortFlags) String() string { return fmt.Sprint(g.m) }

func (g *guestPortFlags) Set(v string) error {
	p, addr, ok := strings.Cut(v, "=")
	port, err := strconv.Atoi(p)
	if !ok || err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("%q: want port=host:port with a port in 1..65535", v)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	if _, dup := g.m[port]; dup {
		return fmt.Errorf("guest port %d given twice", port)
	}
	if g.m == nil {
		g.m = map[int]string{}
	}
	g.m[port] = addr
	return nil
}

// readToken reads a token file, trimming the trailing newline that editors
// and `echo` add. The token itself is never printed.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return tok, nil
}
