package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/cocoonstack/vk-sandbox/pool"
)

// What the virtual node says about sandboxd (docs/architecture.md, "Node
// health"): the SandboxdReady condition, and the NoSchedule taint that keeps
// the scheduler from binding Pods while sandboxd cannot take claims.
const (
	ConditionSandboxdReady   corev1.NodeConditionType = "SandboxdReady"
	TaintSandboxdUnavailable string                   = "sandbox.cocoonstack.io/sandboxd-unavailable"
)

// SandboxdReady condition reasons.
const (
	reasonSandboxdReady        = "SandboxdReady"        // True: /healthz and /v1/info answer, neither draining nor full
	reasonSandboxdTenantToken  = "SandboxdTenantToken"  // True: /healthz answers; a tenant token may not read /v1/info
	reasonSandboxdInfoFailed   = "SandboxdInfoFailed"   // Unknown: /healthz answers, /v1/info fails otherwise
	ReasonSandboxdUnreachable  = "SandboxdUnreachable"  // False, tainted
	reasonSandboxdTokenRefused = "SandboxdTokenRefused" // False, tainted: 401
	reasonSandboxdDraining     = "SandboxdDraining"     // False, tainted
	reasonSandboxdAtCapacity   = "SandboxdAtCapacity"   // False, tainted
)

// sandboxdProbe is what the node's health check asks sandboxd; *pool.Client
// implements it.
type sandboxdProbe interface {
	Healthz(ctx context.Context) error
	Info(ctx context.Context) (pool.Info, error)
}

// sandboxdHealth is one verdict on sandboxd.
type sandboxdHealth struct {
	status          corev1.ConditionStatus
	reason, message string
	// taint is the value of the TaintSandboxdUnavailable taint, "" for none.
	taint string
}

// usable reports whether claims can reach sandboxd at all: it answers and
// takes the token. /readyz fails otherwise; a node that is draining or full
// still works for the Pods it holds.
func (h sandboxdHealth) usable() bool {
	return h.reason != ReasonSandboxdUnreachable && h.reason != reasonSandboxdTokenRefused
}

// checkSandboxd asks /healthz, then /v1/info, and judges.
//
// Every verdict that makes a new claim fail taints the node, so the
// scheduler stops binding Pods that would sit Pending:
//   - unreachable (/healthz fails): nothing can be claimed or released;
//   - token refused (401 on /v1/info): every claim would be 401 too;
//   - draining: sandboxd answers every claim 429 until the drain ends;
//   - at capacity: every claim would be a capacity miss. Pods already bound
//     keep retrying, slowly; new ones wait unscheduled, where the
//     scheduler's own reason names the taint, until a claim is released.
//
// A 403 on /v1/info is a tenant token, not a fault: claims work, and only
// draining and capacity cannot be seen.
func checkSandboxd(ctx context.Context, p sandboxdProbe) sandboxdHealth {
	if err := p.Healthz(ctx); err != nil {
		return sandboxdHealth{status: corev1.ConditionFalse, reason: ReasonSandboxdUnreachable,
			message: err.Error(), taint: "unreachable"}
	}
	info, err := p.Info(ctx)
	switch {
	case err == nil:
	case errors.Is(err, pool.ErrForbidden):
		return sandboxdHealth{status: corev1.ConditionTrue, reason: reasonSandboxdTenantToken,
			message: "sandboxd answers; the token is a tenant token, which may not read /v1/info, so draining and capacity are not known"}
	case pool.StatusCode(err) == http.StatusUnauthorized:
		return sandboxdHealth{status: corev1.ConditionFalse, reason: reasonSandboxdTokenRefused,
			message: "sandboxd refused the token (401): check --sandboxd-token-file", taint: "token-refused"}
	case pool.StatusCode(err) == 0 && pool.IsRetryable(err):
		// /healthz answered a moment ago; the connection went since.
		return sandboxdHealth{status: corev1.ConditionFalse, reason: ReasonSandboxdUnreachable,
			message: err.Error(), taint: "unreachable"}
	default:
		return sandboxdHealth{status: corev1.ConditionUnknown, reason: reasonSandboxdInfoFailed,
			message: "sandboxd answers /healthz, but /v1/info failed: " + err.Error()}
	}
	switch {
	case info.Draining:
		return sandboxdHealth{status: corev1.ConditionFalse, reason: reasonSandboxdDraining,
			message: "sandboxd is draining: it refuses every claim", taint: "draining"}
	case info.AtCapacity:
		why := info.AtCapacityReason
		if why == "" {
			why = "no reason given"
		}
		return sandboxdHealth{status: corev1.ConditionFalse, reason: reasonSandboxdAtCapacity,
			message: "sandboxd is at capacity (" + why + "): new claims would be capacity misses", taint: "at-capacity"}
	}
	// The message carries nothing that changes while the verdict holds (no
	// claim count): the node's status is rewritten, and the change logged,
	// only when the verdict changes (nodeStatus.tick compares it whole).
	return sandboxdHealth{status: corev1.ConditionTrue, reason: reasonSandboxdReady,
		message: "sandboxd answers /healthz and /v1/info; it is neither draining nor at capacity"}
}

// defaultStateDirMinFree is the free space below which the state file's
// filesystem puts the node under DiskPressure: a few thousand claims' worth
// of records plus a compaction's copy of the file.
const defaultStateDirMinFree = 64 << 20

// diskPressure judges the free space of the filesystem that holds the state
// file. A state file that cannot grow makes every claim fail; DiskPressure
// True makes the control plane taint the node (node.kubernetes.io/disk-pressure).
func diskPressure(dir string, minFree uint64) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: corev1.NodeDiskPressure}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "StateDirUnreadable", fmt.Sprintf("statfs %s: %v", dir, err)
		return c
	}
	free := st.Bavail * uint64(st.Bsize) //nolint:gosec // block size is positive
	c.Message = fmt.Sprintf("%d MiB free where the state file is (%s); pressure below %d MiB", free>>20, dir, minFree>>20)
	if free < minFree {
		c.Status, c.Reason = corev1.ConditionTrue, "StateDirLowOnSpace"
		return c
	}
	c.Status, c.Reason = corev1.ConditionFalse, "StateDirHasSpace"
	return c
}

// staticConditions are the conditions that do not change: what the
// kubelet's pressure checks guard is not on this node. Reported False with
// the reason, rather than left empty.
func staticConditions() []corev1.NodeCondition {
	return []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "SandboxdAdmitsMemory",
			Message: "microVM memory is admitted by sandboxd, not by this node; a full node is SandboxdReady False (SandboxdAtCapacity)"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "NoHostProcesses",
			Message: "sandbox Pods run in microVMs, not as processes of this host"},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "SandboxdNetworking",
			Message: "sandboxd wires each microVM's network"},
	}
}
