package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

// envName is the environment variable of a flag: SANDBOXD_<NAME> for the
// sandboxd-* flags, VK_<NAME> for the rest. --kubeconfig has none of its
// own: $KUBECONFIG is client-go's list of files, and is read as such (see
// restConfig). --version and --help have none.
func envName(flagName string) string {
	switch flagName {
	case "kubeconfig", "version":
		return ""
	}
	up := strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
	if strings.HasPrefix(up, "SANDBOXD_") {
		return up
	}
	return "VK_" + up
}

// applyEnv sets every flag whose variable is set from the environment,
// before the command line is parsed: a flag on the command line wins over
// its variable, which wins over the built-in default. A value that does
// not parse is an error naming the variable, never silently ignored.
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if name == "" || err != nil {
			return
		}
		if v, ok := lookup(name); ok {
			if serr := f.Value.Set(strings.TrimSpace(v)); serr != nil {
				err = fmt.Errorf("$%s=%q: %v", name, v, serr)
			}
		}
	})
	return err
}

// newFlagSet reports a bad flag in one line with a hint, and prints the
// full usage only for -h/--help.
func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("vk-sandbox", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// commands are the words that may start the command line; with none the
// daemon runs. TestHelpListsEveryCommand keeps this list and usage true.
var commands = []struct{ name, summary string }{
	{"claims", "list the claims of a state file, read-only (vk-sandbox claims --help)"},
	{"claims salvage", "copy every record of a damaged state file that verifies into a new file"},
	{"help", "print this help"},
}

var commandNames = func() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}()

// usage writes the commands, then every flag of the daemon with its
// variable and default.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "Usage: vk-sandbox [flags]         run the virtual node")
	fmt.Fprintln(w, "       vk-sandbox <command> [flags]")
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "Flags of the daemon:")
	fmt.Fprintln(w, "Every flag but --kubeconfig and --version can also be set by the environment variable shown; the flag wins.")
	fs.VisitAll(func(f *flag.Flag) {
		env := ""
		if n := envName(f.Name); n != "" {
			env = " [$" + n + "]"
		}
		def := ""
		if f.DefValue != "" {
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  --%s%s%s\n      %s\n", f.Name, env, def, f.Usage)
	})
}

// printUsage writes the commands and the daemon's flags to w.
func printUsage(w io.Writer) {
	fs := newFlagSet()
	defineFlags(fs, &config{})
	usage(w, fs)
}

// versionLine is the version, commit and Go version.
func versionLine() string {
	v, commit, goVersion := buildInfo()
	return fmt.Sprintf("vk-sandbox %s (commit %s, %s)", v, commit, goVersion)
}

// buildInfo is the version, commit and Go version. The version comes
// from -ldflags when stamped; the commit and its state come from the
// binary's build info, which `go build` records from git.
func buildInfo() (v, commit, goVersion string) {
	commit, dirty, goVersion := cmp.Or(stampedCommit, "unknown"), "", "unknown"
	v = version
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && stampedCommit == "":
				commit = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "-dirty"
			}
		}
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return v, commit + dirty, goVersion
}

// exitOnFlagError prints err in one line, with a hint, and exits 2; for
// -h/--help it prints the usage and exits 0.
func exitOnFlagError(err error) {
	if err == flag.ErrHelp {
		printUsage(os.Stdout)
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "vk-sandbox: %v\nRun 'vk-sandbox --help' for the flags.\n", err)
	os.Exit(2)
}
