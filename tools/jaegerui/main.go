// Command vk-jaegerui opens one trace in the Jaeger UI in headless
// Chromium (chromedp), checks that the page shows the trace's spans (each
// expected span name in the DOM text) and saves a PNG screenshot of it.
//
// It is what make test-observability and make observability-screenshot
// drive; it is a module of its own so that the main go.mod never pulls in
// chromedp. Exit status: 0 the spans are shown (and -out is written), 3 the
// page is Jaeger's placeholder, served by a binary built without the UI
// assets (the module build is one: see docs/observability.md), 1 anything
// else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

const version = "v0.1.0"

// placeholderMarker is in the page Jaeger serves instead of the UI when
// its binary has no UI assets embedded (cmd/query/app/ui/placeholder).
const placeholderMarker = "This is not the Jaeger UI you are looking for"

// exitPlaceholder tells the caller the UI itself is missing.
const exitPlaceholder = 3

func main() {
	url := flag.String("url", "", "the trace page, e.g. http://127.0.0.1:16686/trace/<id> (required)")
	expect := flag.String("expect", "", "comma-separated span names the page must show")
	out := flag.String("out", "", "PNG file for the screenshot; empty takes none")
	chromium := flag.String("chromium", "", "Chromium binary (default: chromium, chromium-browser or google-chrome on PATH)")
	timeout := flag.Duration("timeout", 60*time.Second, "how long the page may take to show every span")
	width := flag.Int("width", 1400, "window width")
	height := flag.Int("height", 900, "window height")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("vk-jaegerui", version)
		return
	}
	if *url == "" {
		fmt.Fprintln(os.Stderr, "vk-jaegerui: -url is required")
		os.Exit(2)
	}
	err := run(*url, splitList(*expect), *out, *chromium, *timeout, *width, *height)
	switch {
	case errors.Is(err, errPlaceholder):
		fmt.Fprintln(os.Stderr, "vk-jaegerui:", err)
		os.Exit(exitPlaceholder)
	case err != nil:
		fmt.Fprintln(os.Stderr, "vk-jaegerui:", err)
		os.Exit(1)
	}
}

var errPlaceholder = errors.New("the page is Jaeger's placeholder: this Jaeger binary was built without the UI assets, so there is no trace view to check or capture")

func run(url string, expect []string, out, chromium string, timeout time.Duration, width, height int) error {
	bin, err := findChromium(chromium)
	if err != nil {
		return err
	}
	profile, err := os.MkdirTemp("", "vk-jaegerui-profile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	// The network is closed here, and a browser must not try to reach
	// anything but the page: no sync, no component updates, no QUIC.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	defer cancelT()

	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		return fmt.Errorf("open %s: %w", url, err)
	}
	// The UI renders the trace after its API call returns: poll the DOM
	// text until every name is there (or the deadline passes).
	var missing []string
	for {
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		if err != nil {
			return fmt.Errorf("read the page of %s: %w (names still missing: %v)", url, err, missing)
		}
		if strings.Contains(text, placeholderMarker) {
			return errPlaceholder
		}
		missing = missing[:0]
		for _, name := range expect {
			if !strings.Contains(text, name) {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never showed %v within %s; its text:\n%s", url, missing, timeout, clip(text, 2000))
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Printf("the page shows every expected span: %s\n", strings.Join(expect, ", "))
	if out == "" {
		return nil
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		return err
	}
	fmt.Printf("screenshot: %s (%d bytes)\n", out, len(png))
	return nil
}

func findChromium(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH (apt-get install chromium)")
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
