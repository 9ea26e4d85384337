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

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// claimsCommand is `vk-sandbox claims [salvage]`. The listing is an
// operator's read-only view of a state file: it takes no lock (a running
// daemon keeps its own), writes nothing, and never prints a token. Damage
// is reported with its place, and a file that cannot be read is an error,
// never an empty list. Exit status: 0 the file is whole and listed; 1 it
// cannot be read, or startup would refuse it; 2 a usage error; 3
// (exitDamaged) its tail is damaged, so the listing misses what salvage
// may recover. Salvage writes a new file and never the old one, and holds
// the old one's lock while it runs: a file a live daemon holds is refused.
// Flags may come before or after the word salvage.
func claimsCommand(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("vk-sandbox claims", flag.ContinueOnError)
	fs.SetOutput(errOut)
	path := fs.String("state-path", envOr("VK_STATE_PATH", "/var/lib/vk-sandbox/claims.json"), "the state file to read [$VK_STATE_PATH]")
	asJSON := fs.Bool("json", false, "print the rows as JSON (tokens redacted); listing only")
	dst := fs.String("out", "", "salvage only: the new state file to write; it must not exist")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: vk-sandbox claims [--state-path PATH] [--json]")
		fmt.Fprintln(errOut, "       vk-sandbox claims salvage [--state-path PATH] --out NEW")
		fs.PrintDefaults()
	}
	words, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(errOut, "vk-sandbox claims: "+format+"\n", a...)
		return 2
	}
	switch {
	case len(words) == 1 && words[0] == "salvage":
		if *asJSON {
			return fail("--json is for the listing, not salvage")
		}
		if *dst == "" {
			return fail("salvage needs --out, the new file to write")
		}
		return salvageCommand(*path, *dst, out, errOut)
	case len(words) > 0:
		return fail("unknown argument %q: the subcommand is salvage", words[0])
	case *dst != "":
		return fail("--out is for salvage")
	}
	// A missing file reads as an empty table to the store (it is one, for a
	// new node); here it would say "no claims" of a file never read.
	if _, err := os.Stat(*path); err != nil {
		fmt.Fprintf(errOut, "vk-sandbox claims: cannot read the state file: %v (check --state-path or $VK_STATE_PATH; this says nothing about the claims of this node)\n", err)
		return 1
	}
	r, err := store.Inspect(*path)
	if err != nil {
		fmt.Fprintf(errOut, "vk-sandbox claims: %v\n", err)
		printCuts(errOut, r.Cuts)
		return 1
	}
	if *asJSON {
		if rc := printClaimsJSON(out, errOut, r); rc != 0 {
			return rc
		}
	} else {
		printClaimsTable(out, r, time.Now())
		printCuts(out, r.Cuts)
	}
	if t := r.Torn; t != nil {
		// Never "0 claims" and exit 0 for a damaged file: the uninstall
		// procedure (docs/install.md) deletes state on that word, and the
		// damaged tail may hold a release token.
		fmt.Fprintf(errOut, "vk-sandbox claims: %s: damaged: salvage first: a damaged tail of %d bytes at byte offset %d (line %d to the end, %d bytes in all): %s; the listing holds only what precedes it (docs/state-file.md)\n",
			*path, t.Size-t.Offset, t.Offset, t.Line, t.Size, t.Reason)
		return exitDamaged
	}
	return 0
}

// exitDamaged is the exit status of `vk-sandbox claims` for a file whose
// tail is damaged (docs/install.md lists every status).
const exitDamaged = 3

// printCuts names the cut files kept beside the state file: what earlier
// startup repairs cut from it, which salvage can read.
func printCuts(w io.Writer, cuts []store.CutFile) {
	for _, c := range cuts {
		fmt.Fprintf(w, "cut file kept by a startup repair: %s (%d bytes); read it with vk-sandbox claims salvage --state-path %s --out NEW (docs/state-file.md)\n",
			c.Path, c.Size, c.Path)
	}
}

// parseInterleaved parses flags anywhere among args and returns the other
// words in order: the standard flag package stops at the first word, and
// would silently ignore every flag after it.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return words, nil
		}
		words = append(words, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// salvageCommand runs store.Salvage and prints what it kept and each line
// it could not keep, by place, key and sandbox ID: never a token.
func salvageCommand(src, dst string, out, errOut io.Writer) int {
	rep, err := store.Salvage(src, dst, store.Options{})
	if err != nil {
		fmt.Fprintf(errOut, "vk-sandbox claims salvage: %v\n", err)
		return 1
	}
	fmt.Fprintf(out, "%s: %d claims kept from %d records of %s (format version %d); %s was not changed\n",
		dst, rep.Kept, rep.Records, src, rep.Version, src)
	if len(rep.Lost) == 0 {
		fmt.Fprintln(out, "every line was kept")
		return 0
	}
	fmt.Fprintf(out, "%d lines could not be kept (their bytes stay in %s at these places):\n", len(rep.Lost), src)
	for _, l := range rep.Lost {
		fmt.Fprintf(out, "  line %d (byte offset %d): %s", l.Line, l.Offset, l.Reason)
		if l.Key != "" {
			fmt.Fprintf(out, " [%s key %s", l.Op, l.Key)
			if l.ID != "" {
				fmt.Fprintf(out, ", sandbox %s", l.ID)
			}
			fmt.Fprint(out, "]")
		}
		fmt.Fprintln(out)
	}
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
		Cuts      []store.CutFile `json:"cutFiles,omitempty"`
		Claims    []claimRow      `json:"claims"`
	}{r.Version, r.Reference, r.Torn, r.Cuts, rowsOf(r)}
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
			age = duration.HumanDuration(now.Sub(c.ClaimedAt))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Key, c.ID, c.PodUID, owner, c.Deadline.UTC().Format(time.RFC3339), age)
	}
	_ = w.Flush()
	if t := r.Torn; t != nil {
		fmt.Fprintf(out, "%d claims before a damaged tail; format version %d\n", len(r.Rows), r.Version)
		fmt.Fprintf(out, "damaged: salvage first: %d bytes at byte offset %d (line %d to the end of %d bytes): %s; %d lines in it; the next start cuts them into a cut file\n",
			t.Size-t.Offset, t.Offset, t.Line, t.Size, t.Reason, t.Records)
		return
	}
	fmt.Fprintf(out, "%d claims; format version %d", len(r.Rows), r.Version)
	if r.Reference {
		fmt.Fprint(out, " (a JSON claims document, migrated at the next start)")
	}
	fmt.Fprintln(out)
}
