package podload

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Logf writes a timestamped progress line to stderr.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

// Main is a harness's main: a bad option (optErr) exits 2, then run gets a
// context that SIGINT or SIGTERM cancels, and its error exits 1. Messages
// are prefixed with name.
func Main(name string, optErr error, run func(context.Context) error) {
	if optErr != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, optErr)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
