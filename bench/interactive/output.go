package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cocoonstack/vk-sandbox/bench/podload"
)

type report struct {
	Started      time.Time `json:"started"`
	GoVersion    string    `json:"go_version"`
	NumCPU       int       `json:"num_cpu"`
	LoadAvgStart string    `json:"loadavg_at_start"`
	LoadAvgEnd   string    `json:"loadavg_at_end"`
	Samples      int       `json:"round_trip_samples"`
	SizeMiB      int       `json:"throughput_mib"`
	Reps         int       `json:"throughput_reps"`
	// AgentRelays and PortRelays are the emulator's agent relay and port
	// relay upgrades during the run (every transport).
	AgentRelays int64             `json:"agent_relays"`
	PortRelays  int64             `json:"port_relays"`
	Transports  []transportResult `json:"transports"`
}

// transportResult is one transport's figures. Round trips are in seconds;
// throughputs in MiB/s of payload, one value per repetition.
type transportResult struct {
	Via         string        `json:"via"`
	ExecNew     podload.Stats `json:"exec_true"`                  // exec POD -- true
	ForwardNew  podload.Stats `json:"forward_connect_echo"`       // a new forwarded connection, 16 B echoed
	ExecOpen    podload.Stats `json:"exec_session_round_trip"`    // 16 B through an open exec -i cat
	ForwardOpen podload.Stats `json:"forward_session_round_trip"` // 16 B through an open forwarded connection
	// The new sessions straight at the emulator: its agent relay and
	// silkd, its port relay.
	ExecDirect    podload.Stats `json:"direct_exec_true"`
	ForwardDirect podload.Stats `json:"direct_connect_echo"`
	// CatFile: exec cat FILE, guest to client. CatEcho: exec -i cat, both
	// ways at once. ForwardEcho: the echo through port-forward, both ways
	// at once. Upload: exec -i sh -c 'cat > FILE', client to guest.
	CatFileMiBs     []float64 `json:"exec_cat_file_mib_s"`
	CatEchoMiBs     []float64 `json:"exec_cat_echo_mib_s"`
	ForwardEchoMiBs []float64 `json:"forward_echo_mib_s"`
	UploadMiBs      []float64 `json:"exec_upload_mib_s"`
	// CPU is, by figure, each process's CPU milliseconds per MiB of
	// payload (harness: this process, the emulator and the client; other:
	// the rest of the machine).
	CPU map[string]map[string]float64 `json:"cpu_ms_per_mib"`
}

// The throughput figures, as keys of transportResult.CPU.
const (
	figUpload      = "exec_upload"
	figCatFile     = "exec_cat_file"
	figCatEcho     = "exec_cat_echo"
	figForwardEcho = "forward_echo"
)

// median of a few throughput repetitions.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// printTable writes the results as the Markdown table of bench/HISTORY.md:
// exec beside port-forward, and their ratio.
func printTable(w io.Writer, rep report) {
	fmt.Fprintf(w, "\n%d round trips of each kind, %d MiB × %d, load average %s → %s\n\n",
		rep.Samples, rep.SizeMiB, rep.Reps, rep.LoadAvgStart, rep.LoadAvgEnd)
	fmt.Fprintln(w, "| transport | figure | exec | port-forward | exec / port-forward |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	ms := func(x float64) string { return fmt.Sprintf("%.2f", x*1000) }
	mibs := func(x float64) string { return fmt.Sprintf("%.0f", x) }
	row := func(via, what string, exec, fwd float64, unit func(float64) string) {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2f |\n", via, what, unit(exec), unit(fwd), exec/fwd)
	}
	for _, t := range rep.Transports {
		row(t.Via, "new session, p50 (ms): `true` / connect + 16 B echo", t.ExecNew.P50, t.ForwardNew.P50, ms)
		row(t.Via, "new session, p99 (ms)", t.ExecNew.P99, t.ForwardNew.P99, ms)
		if t.Via == viaKubectl {
			continue
		}
		row(t.Via, "of which sandboxd + guest, p50 (ms): the same straight at the emulator", t.ExecDirect.P50, t.ForwardDirect.P50, ms)
		row(t.Via, "open session, p50 (ms): 16 B through `cat` / the echo", t.ExecOpen.P50, t.ForwardOpen.P50, ms)
		row(t.Via, "open session, p99 (ms)", t.ExecOpen.P99, t.ForwardOpen.P99, ms)
		row(t.Via, fmt.Sprintf("guest → client (MiB/s): `cat FILE` / the echo, %d MiB", rep.SizeMiB), median(t.CatFileMiBs), median(t.ForwardEchoMiBs), mibs)
		row(t.Via, "both ways at once (MiB/s): `cat` of stdin / the echo", median(t.CatEchoMiBs), median(t.ForwardEchoMiBs), mibs)
	}
	fmt.Fprintln(w)
	// The kubectl binary's figures are the new sessions only.
	full := slices.DeleteFunc(slices.Clone(rep.Transports), func(t transportResult) bool { return t.Via == viaKubectl })
	for _, t := range full {
		fmt.Fprintf(w, "%s: exec stdin, client → guest (`sh -c 'cat > FILE'`): %.0f MiB/s\n", t.Via, median(t.UploadMiBs))
	}
	fmt.Fprintln(w, "\nCPU ms per MiB of payload, by process:")
	procs := []string{"vk-sandbox", "kube-apiserver", "harness", "other"}
	fmt.Fprintf(w, "| transport | figure | %s |\n|---|---|%s\n", strings.Join(procs, " | "), strings.Repeat("---|", len(procs)))
	for _, t := range full {
		for _, fig := range []string{figCatFile, figCatEcho, figForwardEcho, figUpload} {
			fmt.Fprintf(w, "| %s | %s |", t.Via, fig)
			for _, p := range procs {
				fmt.Fprintf(w, " %.1f |", t.CPU[fig][p])
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "\nsandboxd saw %d agent relays and %d port relays, and no buffered exec\n", rep.AgentRelays, rep.PortRelays)
}
