// Command vk-chartcheck reads the deployment artefacts of vk-sandbox with
// the libraries of the tools that consume them, so that the tests of the
// main module check them the way Helm and Prometheus would, without the
// main go.mod depending on either:
//
//	vk-chartcheck render [-namespace NS] [-release NAME] [-f values.yaml]... [-set k=v]... CHART
//	    renders the chart as `helm template --include-crds` does (Helm's
//	    own install action, client-only dry run) and prints the manifests,
//	    CRDs first, as one multi-document YAML stream on stdout.
//	vk-chartcheck lint [-namespace NS] [-f values.yaml]... [-set k=v]... CHART
//	    runs `helm lint --strict` (Helm's lint action): every message of
//	    severity INFO or above is printed, and a warning or an error exits 1.
//	vk-chartcheck rules FILE
//	    parses FILE, a Prometheus rule file or a PrometheusRule object (its
//	    spec is the rule file), with Prometheus's rule parser (rulefmt,
//	    which validates every expression with the PromQL parser and every
//	    annotation template), and prints one JSON object per rule: its
//	    group, name, expression, the metric names the expression selects,
//	    and for each metric the labels its selectors match on.
//	vk-chartcheck --version
//
// It is built by scripts/build-tools.sh (tool vk-chartcheck, module
// tools/chartcheck) and used by e2e/chart_test.go.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/strvals"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "--version", "-version":
		fmt.Println(version())
		return
	case "render":
		err = render(os.Args[2:], os.Stdout)
	case "lint":
		err = lint(os.Args[2:], os.Stdout)
	case "rules":
		err = rules(os.Args[2:], os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vk-chartcheck:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: vk-chartcheck render [-namespace NS] [-release NAME] [-f values.yaml]... [-set k=v]... CHART\n       vk-chartcheck lint [-namespace NS] [-f values.yaml]... [-set k=v]... CHART\n       vk-chartcheck rules FILE\n       vk-chartcheck --version")
	os.Exit(2)
}

// version names the Helm and Prometheus modules this binary was built with.
func version() string {
	v := "vk-chartcheck"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "helm.sh/helm/v4" || d.Path == "github.com/prometheus/prometheus" {
				v += " " + d.Path + "@" + d.Version
			}
		}
	}
	return v
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// chartArgs are the flags render and lint share.
type chartArgs struct {
	fs          *flag.FlagSet
	ns, release *string
	files, sets multi
}

func newChartArgs(name string) *chartArgs {
	a := &chartArgs{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	a.ns = a.fs.String("namespace", "vk-sandbox", "release namespace")
	a.release = a.fs.String("release", "vk-sandbox", "release name")
	a.fs.Var(&a.files, "f", "values file (repeatable; later files win)")
	a.fs.Var(&a.sets, "set", "k=v, as helm --set (repeatable; wins over -f)")
	return a
}

// parse reads the flags and returns the chart directory and the values.
func (a *chartArgs) parse(args []string) (string, map[string]any, error) {
	if err := a.fs.Parse(args); err != nil {
		return "", nil, err
	}
	if a.fs.NArg() != 1 {
		return "", nil, fmt.Errorf("%s: name one chart directory", a.fs.Name())
	}
	vals := map[string]any{}
	for _, f := range a.files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", nil, err
		}
		v, err := loader.LoadValues(strings.NewReader(string(b)))
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", f, err)
		}
		vals = loader.MergeMaps(vals, v)
	}
	for _, s := range a.sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			return "", nil, fmt.Errorf("-set %s: %w", s, err)
		}
	}
	// The loader logs each symbolic link it follows (files/rbac.yaml and
	// crds/ link to manifests/) through slog's default logger.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	return a.fs.Arg(0), vals, nil
}

func render(args []string, out io.Writer) error {
	a := newChartArgs("render")
	dir, vals, err := a.parse(args)
	if err != nil {
		return err
	}
	chrt, err := loader.Load(dir)
	if err != nil {
		return err
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	inst := action.NewInstall(cfg)
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true
	inst.IncludeCRDs = true
	inst.ReleaseName = *a.release
	inst.Namespace = *a.ns
	r, err := inst.Run(chrt, vals)
	if err != nil {
		return err
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return fmt.Errorf("render: unexpected release type %T", r)
	}
	_, err = io.WriteString(out, rel.Manifest)
	return err
}

func lint(args []string, out io.Writer) error {
	a := newChartArgs("lint")
	dir, vals, err := a.parse(args)
	if err != nil {
		return err
	}
	l := action.NewLint()
	l.Strict = true
	l.Namespace = *a.ns
	res := l.Run([]string{dir}, vals)
	for _, m := range res.Messages {
		fmt.Fprintln(out, m.Error())
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("lint %s: %w", dir, errors.Join(res.Errors...))
	}
	return nil
}

// ruleInfo is one rule of the file, as printed by `rules`.
type ruleInfo struct {
	Group   string   `json:"group"`
	Alert   string   `json:"alert,omitempty"`
	Record  string   `json:"record,omitempty"`
	Expr    string   `json:"expr"`
	Metrics []string `json:"metrics"`
	// Labels: metric name → the label names its selectors match on.
	Labels map[string][]string `json:"labels"`
}

func rules(args []string, out io.Writer) error {
	if len(args) != 1 {
		return errors.New("rules: name one file")
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	b, err = ruleFile(b)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, p, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", args[0], errors.Join(errs...))
	}
	infos := []ruleInfo{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				return fmt.Errorf("%s: group %s, rule %s%s: %w", args[0], g.Name, r.Alert, r.Record, err)
			}
			names, matched, err := selected(expr)
			if err != nil {
				return fmt.Errorf("%s: group %s, rule %s%s: %w", args[0], g.Name, r.Alert, r.Record, err)
			}
			infos = append(infos, ruleInfo{Group: g.Name, Alert: r.Alert, Record: r.Record, Expr: r.Expr, Metrics: names, Labels: matched})
		}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(infos)
}

// ruleFile returns the rule file in b: b itself, or the spec of a
// PrometheusRule object (which has the rule file's shape).
func ruleFile(b []byte) ([]byte, error) {
	var head struct {
		Kind string    `yaml:"kind"`
		Spec yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &head); err != nil {
		return nil, err
	}
	if head.Kind == "" {
		return b, nil
	}
	if head.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("a %s, not a rule file or a PrometheusRule", head.Kind)
	}
	return yaml.Marshal(&head.Spec)
}

// selected lists, sorted and once each, the metric names the expression's
// selectors select, and for each the label names they match on. A
// selector without an exact name (a regular expression on __name__, or
// none) is an error: what it reads could not be checked against the
// binary's /metrics.
func selected(expr parser.Expr) ([]string, map[string][]string, error) {
	var names []string
	matched := map[string][]string{}
	var err error
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			err = fmt.Errorf("selector %s names no metric exactly", vs)
			return err
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
			matched[name] = []string{}
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName && !slices.Contains(matched[name], m.Name) {
				matched[name] = append(matched[name], m.Name)
			}
		}
		slices.Sort(matched[name])
		return nil
	})
	slices.Sort(names)
	return names, matched, err
}
