package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// MaxExecOutput is sandboxd's cap on one buffered command's stdout plus
// stderr; a command that prints more is answered 413.
const MaxExecOutput = 8 << 20

// execBodyLimit bounds an exec answer. JSON may carry a byte of output as
// six ("\u0000"), so the cap on output alone does not bound the body.
const execBodyLimit = 6*MaxExecOutput + 64<<10

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec: one command run
// to completion inside the guest, without stdin and without a terminal.
type ExecRequest struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	// TimeoutSeconds ends the command after that long (504); 0 leaves it
	// bounded only by the request.
	TimeoutSeconds int64 `json:"timeout_seconds"`
}

// ExecResult is a command that ran to completion. Output that was not
// UTF-8 arrives with U+FFFD in place of the bad bytes.
type ExecResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// Exec runs r in sandbox id with the sandbox's own token (empty falls back
// to the node token, which sandboxd refuses for another's sandbox). A hibernated
// sandbox wakes on its own.
//
// A command is not idempotent, so Exec makes exactly one attempt. Its
// deadline is the command's timeout plus one attempt's worth for the wake-up
// and the answer; without a timeout only ctx bounds it, as only the request
// bounds the command on sandboxd's side. Answers other than 200 come back as
// *HTTPError (StatusCode tells 413, 409, 502, 503 and 504 apart).
func (c *Client) Exec(ctx context.Context, id, token string, r ExecRequest) (ExecResult, error) {
	switch {
	case id == "":
		return ExecResult{}, errors.New("sandboxd exec: empty sandbox id")
	case len(r.Argv) == 0:
		return ExecResult{}, fmt.Errorf("sandboxd exec %s: empty argv", id)
	}
	if token == "" {
		token = c.token
	}
	r.TimeoutSeconds = max(r.TimeoutSeconds, 0)
	body, err := json.Marshal(r)
	if err != nil {
		return ExecResult{}, fmt.Errorf("sandboxd exec %s: encode request: %w", id, err)
	}
	x := exchange{verb: VerbExec, id: id, method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(id) + "/exec",
		token: token, body: body, limit: execBodyLimit}
	actx := ctx
	if r.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, time.Duration(r.TimeoutSeconds)*time.Second+c.attempt)
		defer cancel()
	}
	start := time.Now()
	status, data, err := c.roundTrip(actx, x)
	if c.obs != nil {
		c.obs.Request(x.verb, status, time.Since(start))
	}
	if err != nil {
		return ExecResult{}, err
	}
	// exit_code is required: a missing one must not read as success.
	var w struct {
		ExitCode *int   `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	if err := decodeObject(data, &w); err != nil {
		return ExecResult{}, c.badResponse(x, status, err.Error(), data)
	}
	if w.ExitCode == nil {
		return ExecResult{}, c.badResponse(x, status, "exec answer has no exit_code", nil)
	}
	return ExecResult{ExitCode: *w.ExitCode, Stdout: w.Stdout, Stderr: w.Stderr}, nil
}
