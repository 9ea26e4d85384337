// Command sandboxd-sim serves the sandboxd wire protocol (DESIGN §7) from
// an in-memory node, for the demo, tests and benchmarks.
//
// Once it listens it prints exactly one line to stdout,
//
//	listening on http://127.0.0.1:7777
//
// so that a parent started with --listen 127.0.0.1:0 can learn the port.
// Logs are JSON on stderr. SIGINT/SIGTERM drain requests, stop the reaper
// and save --state.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd-sim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sandboxd-sim", flag.ContinueOnError)
	var (
		listen        = fs.String("listen", "127.0.0.1:7777", "address to listen on (port 0 picks one; see the stdout line)")
		tokenFile     = fs.String("token-file", "", "file holding the root api_token (required)")
		nodeTokenFile = fs.String("node-token-file", "", "file holding an optional node token (claim, list, get without token, info)")
		pools         = fs.String("pools", "default=64", "warm pools: template[/net/size]=warm,...")
		maxClaims     = fs.Int("max-claims", 0, "cap on live sandboxes; 0 = unlimited")
		claimLatency  = fs.Duration("claim-latency", 0, "latency of every claim before admission")
		claimJitter   = fs.Duration("claim-jitter", 0, "uniform random extra claim latency in [0, jitter)")
		coldLatency   = fs.Duration("cold-latency", 20*time.Millisecond, "extra latency of a claim that finds its warm pool empty (negative = none)")
		failRate      = fs.Float64("fail-rate", 0, "share of claims answered 500 provisioning failed, in [0,1]")
		capacity      = fs.String("capacity", sim.Capacity429, "capacity-miss answer: 429 or redirect")
		refillDelay   = fs.Duration("refill-delay", 0, "time for a claimed warm VM to be replaced")
		statePath     = fs.String("state", "", "optional JSON state file, so sandboxes survive a restart")
		addrPrefix    = fs.String("addr-prefix", "10.77.", "owner_addr range handed out (never dialed)")
		logLevel      = fs.String("log-level", "info", "debug, info, warn or error (request lines are info)")
		showVersion   = fs.Bool("version", false, "print the version and exit")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println("sandboxd-sim", version)
		return nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	if *tokenFile == "" {
		return errors.New("--token-file is required")
	}
	root, err := readToken(*tokenFile)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	var node string
	if *nodeTokenFile != "" {
		if node, err = readToken(*nodeTokenFile); err != nil {
			return fmt.Errorf("--node-token-file: %w", err)
		}
	}
	poolMap, err := sim.ParsePools(*pools)
	if err != nil {
		return fmt.Errorf("--pools: %w", err)
	}
	srv, err := sim.New(sim.Config{
		RootToken: root, NodeToken: node, Pools: poolMap, MaxClaims: *maxClaims,
		ClaimLatency: *claimLatency, ClaimJitter: *claimJitter, ColdLatency: *coldLatency,
		FailRate: *failRate, Capacity: *capacity, RefillDelay: *refillDelay,
		StatePath: *statePath, AddrPrefix: *addrPrefix, Logger: log,
	})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		_ = srv.Close()
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Printf("listening on http://%s\n", ln.Addr())
	log.Info("listening", "addr", ln.Addr().String(), "version", version, "pools", *pools)

	select {
	case err = <-served: // Serve only returns early on a listener failure
	case <-ctx.Done():
		log.Info("shutting down")
		shCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = hs.Shutdown(shCtx)
		cancel()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, srv.Close())
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
