package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoPrometheus is StartPrometheus's answer on a machine without the
// prometheus binary (Debian: apt-get install prometheus).
var ErrNoPrometheus = errors.New("no prometheus binary on PATH (apt-get install prometheus)")

// Prometheus is a running Prometheus server that scrapes the given
// targets with exemplar storage on, on a fresh loopback port.
type Prometheus struct {
	// URL is its API and UI, e.g. http://127.0.0.1:40127.
	URL string
	// Log is its combined stdout and stderr; Config its configuration.
	Log, Config string

	p *proc
}

// PrometheusOptions configure StartPrometheus.
type PrometheusOptions struct {
	// Dir holds the configuration, the TSDB and the log. Default: a new
	// temporary directory.
	Dir string
	// Logf receives progress lines. Default: none.
	Logf func(format string, args ...any)
	// StartTimeout bounds the wait for /-/ready. Default 60s.
	StartTimeout time.Duration
	// Job is the scrape job's name. Default "vk-sandbox".
	Job string
	// Targets are host:port addresses whose /metrics are scraped.
	Targets []string
	// ScrapeInterval defaults to 1s, so that a test sees a sample soon.
	// Rules are evaluated as often.
	ScrapeInterval time.Duration
	// RuleFiles are Prometheus rule files (alerting and recording) to
	// load, by absolute path.
	RuleFiles []string
}

// StartPrometheus starts the prometheus on PATH and returns once it is
// ready. It returns ErrNoPrometheus when there is none.
func StartPrometheus(ctx context.Context, o PrometheusOptions) (*Prometheus, error) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		return nil, ErrNoPrometheus
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Job == "" {
		o.Job = "vk-sandbox"
	}
	if o.ScrapeInterval <= 0 {
		o.ScrapeInterval = time.Second
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "prometheus-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	pr := &Prometheus{Log: filepath.Join(o.Dir, "prometheus.log"), Config: filepath.Join(o.Dir, "prometheus.yml")}
	targets := make([]string, len(o.Targets))
	for i, t := range o.Targets {
		targets[i] = strconv.Quote(t)
	}
	// Prometheus asks for OpenMetrics first, which is what carries the
	// exemplars; exemplar-storage keeps them.
	cfg := fmt.Sprintf("# Written by kubetest.StartPrometheus.\nglobal:\n  scrape_interval: %s\n  evaluation_interval: %s\nscrape_configs:\n  - job_name: %s\n    static_configs:\n      - targets: [%s]\n",
		o.ScrapeInterval, o.ScrapeInterval, strconv.Quote(o.Job), strings.Join(targets, ", "))
	if len(o.RuleFiles) > 0 {
		files := make([]string, len(o.RuleFiles))
		for i, f := range o.RuleFiles {
			files[i] = strconv.Quote(f)
		}
		cfg += fmt.Sprintf("rule_files: [%s]\n", strings.Join(files, ", "))
	}
	if err := os.WriteFile(pr.Config, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	pr.p, err = startOnFreePorts(ctx, "prometheus", 1, o.StartTimeout, o.Logf, func(ports []int) (*proc, func(context.Context) error, error) {
		pr.URL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		p, err := startProc("prometheus", bin, []string{
			"--config.file=" + pr.Config,
			"--storage.tsdb.path=" + filepath.Join(o.Dir, "data"),
			"--web.listen-address=127.0.0.1:" + strconv.Itoa(ports[0]),
			"--enable-feature=exemplar-storage",
			"--log.level=warn",
		}, pr.Log)
		return p, func(ctx context.Context) error { return httpOK(ctx, pr.URL+"/-/ready") }, err
	})
	if err != nil {
		return nil, err
	}
	return pr, nil
}

// Stop ends Prometheus (SIGTERM, then SIGKILL after 5s). It is idempotent.
func (pr *Prometheus) Stop() error {
	if pr == nil {
		return nil
	}
	return stopOnce(&pr.p, 5*time.Second)
}

// Exemplar is one exemplar Prometheus stored for a series.
type Exemplar struct {
	Series map[string]string // the series' labels, __name__ included
	Labels map[string]string // the exemplar's own labels (trace_id, ...)
	Value  string
}

// Exemplars queries /api/v1/query_exemplars for query over the last hour.
func (pr *Prometheus) Exemplars(ctx context.Context, query string) ([]Exemplar, error) {
	now := time.Now()
	q := url.Values{"query": {query}, "start": {strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)}, "end": {strconv.FormatInt(now.Add(time.Minute).Unix(), 10)}}
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   []struct {
			SeriesLabels map[string]string `json:"seriesLabels"`
			Exemplars    []struct {
				Labels map[string]string `json:"labels"`
				Value  string            `json:"value"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	if err := getJSON(ctx, pr.URL+"/api/v1/query_exemplars?"+q.Encode(), &out); err != nil {
		return nil, err
	}
	if out.Status != "success" {
		return nil, fmt.Errorf("prometheus query_exemplars %q: %s %s", query, out.Status, out.Error)
	}
	var ex []Exemplar
	for _, d := range out.Data {
		for _, e := range d.Exemplars {
			ex = append(ex, Exemplar{Series: d.SeriesLabels, Labels: e.Labels, Value: e.Value})
		}
	}
	return ex, nil
}

// Query runs an instant PromQL query and returns how many series it
// answered with.
func (pr *Prometheus) Query(ctx context.Context, query string) (int, error) {
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, pr.URL+"/api/v1/query?"+url.Values{"query": {query}}.Encode(), &out); err != nil {
		return 0, err
	}
	if out.Status != "success" {
		return 0, fmt.Errorf("prometheus query %q: %s %s", query, out.Status, out.Error)
	}
	return len(out.Data.Result), nil
}

// AlertRule is one alerting rule as Prometheus evaluates it.
type AlertRule struct {
	State  string // inactive, pending or firing
	Health string // ok, err or unknown (not evaluated yet)
	Alerts []map[string]string
}

// Alert returns the alerting rule named name from /api/v1/rules, or an
// error if no loaded rule has that name.
func (pr *Prometheus) Alert(ctx context.Context, name string) (AlertRule, error) {
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Groups []struct {
				Rules []struct {
					Name   string `json:"name"`
					State  string `json:"state"`
					Health string `json:"health"`
					Alerts []struct {
						Labels map[string]string `json:"labels"`
					} `json:"alerts"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := getJSON(ctx, pr.URL+"/api/v1/rules?type=alert", &out); err != nil {
		return AlertRule{}, err
	}
	for _, g := range out.Data.Groups {
		for _, r := range g.Rules {
			if r.Name != name {
				continue
			}
			a := AlertRule{State: r.State, Health: r.Health}
			for _, al := range r.Alerts {
				a.Alerts = append(a.Alerts, al.Labels)
			}
			return a, nil
		}
	}
	return AlertRule{}, fmt.Errorf("prometheus has no alerting rule %q loaded", name)
}
