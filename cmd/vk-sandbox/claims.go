package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// claimsCommand is `vk-sandbox claims`: an operator's read-only view of a
// state file. It takes no lock (a running daemon keeps its own), writes
// nothing, and never prints a token. Damage is reported with its place.
func claimsCommand(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("vk-sandbox claims", flag.ContinueOnError)
	fs.SetOutput(errOut)
	path := fs.String("state-path", envOr("VK_STATE_PATH", "/var/lib/vk-sandbox/claims.json"), "the state file to read [$VK_STATE_PATH]")
	asJSON := fs.Bool("json", false, "print the rows as JSON (tokens redacted)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	r, err := store.Inspect(*path)
	if err != nil {
		fmt.Fprintf(errOut, "vk-sandbox claims: %v\n", err)
		return 1
	}
	if *asJSON {
		return printClaimsJSON(out, errOut, r)
	}
	printClaimsTable(out, r, time.Now())
	return 0
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// claimRow is one row as printed: everything but the token.
type claimRow struct {
	Key       string    `json:"key"`
	ID        string    `json:"id"`
	Token     string    `json:"token"`
	Address   string    `json:"address,omitempty"`
	PodUID    string    `json:"podUID"`
	OwnerUID  string    `json:"ownerUID,omitempty"`
	Owner     string    `json:"owner,omitempty"`
	ClaimedAt time.Time `json:"claimedAt"`
	Deadline  time.Time `json:"deadline"`
}

func rowsOf(r store.Report) []claimRow {
	out := make([]claimRow, 0, len(r.Rows))
	for k, c := range r.Rows {
		tok := ""
		if c.Token != "" {
			tok = "[redacted]"
		}
		out = append(out, claimRow{Key: k, ID: c.ID, Token: tok, Address: c.Address, PodUID: c.PodUID,
			OwnerUID: c.OwnerUID, Owner: c.Owner, ClaimedAt: c.ClaimedAt, Deadline: c.Deadline})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func printClaimsJSON(out, errOut io.Writer, r store.Report) int {
	doc := struct {
		Version   int             `json:"version"`
		Reference bool            `json:"reference,omitempty"`
		Torn      *store.TornTail `json:"tornTail,omitempty"`
		Claims    []claimRow      `json:"claims"`
	}{r.Version, r.Reference, r.Torn, rowsOf(r)}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintf(errOut, "vk-sandbox claims: %v\n", err)
		return 1
	}
	return 0
}

func printClaimsTable(out io.Writer, r store.Report, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tID\tPOD UID\tOWNER\tDEADLINE\tAGE")
	for _, c := range rowsOf(r) {
		owner := c.Owner
		switch {
		case owner == store.OwnerUnknown:
			owner = "(unknown)"
		case owner == "" && c.OwnerUID == "":
			owner = "(bare Pod)"
		case owner == "":
			owner = "uid " + c.OwnerUID
		}
		age := "-"
		if !c.ClaimedAt.IsZero() {
			age = now.Sub(c.ClaimedAt).Round(time.Second).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Key, c.ID, c.PodUID, owner, c.Deadline.UTC().Format(time.RFC3339), age)
	}
	_ = w.Flush()
	fmt.Fprintf(out, "%d claims; format version %d", len(r.Rows), r.Version)
	if r.Reference {
		fmt.Fprint(out, " (the reference's claims.json, migrated at the next start)")
	}
	fmt.Fprintln(out)
	if t := r.Torn; t != nil {
		fmt.Fprintf(out, "torn tail from line %d (byte %d of %d): %s; %d unacknowledged records, dropped at the next start\n",
			t.Line, t.Offset, t.Size, t.Reason, t.Records)
	}
}
