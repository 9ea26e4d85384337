// Command sandboxd-sim serves the sandboxd wire protocol from an in-memory
// node, for the demo, tests and benchmarks. Every default is the real
// sandboxd's behaviour; see --help for the flags that opt out.
//
// Once it listens it prints exactly one line to stdout,
//
//	listening on http://127.0.0.1:7777
//
// so that a parent started with --listen 127.0.0.1:0 can learn the port.
// Logs are JSON on stderr. SIGINT/SIGTERM drain requests, stop the reaper,
// save --state and flush spans.
//
// Traces are configured like vk-sandbox's, by the OTEL_* environment only
// (docs/observability.md): with OTEL_EXPORTER_OTLP_ENDPOINT set, every
// request is a server span of service sandboxd-sim, a child of the
// caller's traceparent, exported over OTLP/HTTP.
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
	"syscall"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/telemetry"
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
	o, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if o.showVersion {
		fmt.Println("sandboxd-sim", version)
		return nil
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: o.logLevel}))
	o.cfg.Logger = log
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{ServiceName: "sandboxd-sim", Version: version})
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer func() {
		// After the drain below, so the last requests' spans go out too.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn("flushing spans", "error", err)
		}
	}()
	if tel.ExportingTraces {
		o.cfg.TracerProvider = tel.TracerProvider
	}
	srv, err := sim.New(o.cfg)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", o.listen)
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
	log.Info("listening", "addr", ln.Addr().String(), "version", version, "pools", o.pools,
		"owner_addr", srv.OwnerAddr(), "tenants", len(o.cfg.TenantTokens), "api_version", o.cfg.APIVersion)

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
