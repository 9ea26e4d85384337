// Command vk-sandbox is a virtual-kubelet provider that serves sandbox Pods
// from the node-local sandboxd warm pool. See docs/configuration.md.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/cocoonstack/vk-sandbox/telemetry"
)

// version and stampedCommit are set at build time (make build: -ldflags
// "-X main.version=... -X main.stampedCommit=..."); unstamped, the commit
// comes from the binary's build info.
var (
	version       = "dev"
	stampedCommit = ""
)

func main() {
	if code, done := command(os.Args[1:], os.Stdout, os.Stderr); done {
		os.Exit(code)
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		exitOnFlagError(err)
	}
	if cfg.Version {
		fmt.Println(versionLine())
		return
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "vk-sandbox: --log-level:", err)
		os.Exit(2)
	}
	log := telemetry.NewLogger(os.Stderr, level, cfg.LogFormat == "json")
	slog.SetDefault(log)
	telemetry.InstallVirtualKubeletLogger(log)
	telemetry.InstallKlog(log)

	// SIGTERM/SIGINT stop intake, let in-flight claims finish or roll back,
	// flush the state file, and exit 0. Shutdown never releases a VM.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("vk-sandbox stopped", "error", err)
		os.Exit(1)
	}
	log.Info("vk-sandbox stopped cleanly")
}

// command runs the command its first word names (see commands), if any.
// With none, the daemon runs, and it takes flags only: parseFlags refuses
// any other word.
func command(args []string, out, errOut io.Writer) (code int, done bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "claims":
		return claimsCommand(args[1:], out, errOut), true
	case "help":
		printUsage(out)
		return 0, true
	}
	return 0, false
}
