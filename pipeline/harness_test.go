package pipeline_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cocoonstack/vk-sandbox/pipeline"
	"github.com/cocoonstack/vk-sandbox/pool"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
	"github.com/cocoonstack/vk-sandbox/pool/sim/simtest"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// Every engine, store, emulator and HTTP client a test starts is stopped in
// its cleanup. The one goroutine ignored is started by an init of
// virtual-kubelet's opencensus dependency, which the kube provider (used by
// TestR7Soak) links in; no test starts it, and it never ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

const (
	rootToken = "root-tok-3c1f-pipeline-secret"
	nodeToken = "node-tok-77aa-pipeline-secret"
	template  = "default"
)

// waitTimeout bounds every wait-for-condition helper. Generous because the
// two cores are shared; a passing test never waits this long.
const waitTimeout = 20 * time.Second

var quiet = slog.New(slog.DiscardHandler)

// ---- emulator ---------------------------------------------------------------

// simEnv is a real emulator behind a real loopback HTTP server, with real
// clients holding the root and the node token. emu can go down and come
// back on the same address.
type simEnv struct {
	emu  *simtest.Emulator
	sim  *sim.Server
	url  string
	root *pool.Client
	node *pool.Client
}

// simDefaults fills what a test left unset: the test tokens, one warm
// pool of the test template, and no cold-boot latency.
func simDefaults(cfg sim.Config) sim.Config {
	cfg.RootToken, cfg.NodeToken = rootToken, nodeToken
	if cfg.Pools == nil {
		cfg.Pools = map[pool.Key]int{{Template: template}: 8}
	}
	if cfg.ColdLatency == 0 {
		cfg.ColdLatency = -1
	}
	return cfg
}

func newSim(t testing.TB, cfg sim.Config) *simEnv {
	t.Helper()
	return newSimBehind(t, cfg, nil)
}

// newSimBehind is newSim with the emulator's handler wrapped by wrap (nil:
// served as is).
func newSimBehind(t testing.TB, cfg sim.Config, wrap func(http.Handler) http.Handler) *simEnv {
	t.Helper()
	var opts []simtest.Option
	if wrap != nil {
		opts = append(opts, simtest.Front(func(s *sim.Server) http.Handler { return wrap(s.Handler()) }))
	}
	emu := simtest.Start(t, simDefaults(cfg), opts...)
	env := &simEnv{emu: emu, sim: emu.Sim, url: emu.URL}
	env.root = env.client(t, rootToken)
	env.node = env.client(t, nodeToken)
	return env
}

// fastRetry keeps the client's idempotent-call retries quick.
var fastRetry = pool.RetryPolicy{MaxAttempts: 5, InitialInterval: 2 * time.Millisecond, MaxInterval: 10 * time.Millisecond}

func (e *simEnv) client(t testing.TB, token string) *pool.Client {
	t.Helper()
	return e.emu.Client(t, pool.ClientOptions{Token: token, Retry: fastRetry})
}

func (e *simEnv) count(name string) int64 { return e.sim.Counters()[name] }

// testNode is the node name every test engine runs as; testKey is its node
// key and testID marks its claims at sandboxd.
const testNode = "test-node"

var (
	testKey = []byte("test-node-key-0123456789abcdef!!")
	testID  = pipeline.Identity{Node: testNode, Key: testKey}
)

// sandboxesFor is the emulator's live index: the VMs the test engine made
// for a Pod key.
func (e *simEnv) sandboxesFor(key string) []pool.Sandbox { return liveFor(e.sim, pipeline.PodKey(key)) }

// holdsToken reports whether the emulator holds sandbox id with token: a
// row's credential is the VM's real one.
func (e *simEnv) holdsToken(id, token string) bool {
	for _, sb := range e.sim.Sandboxes() {
		if sb.ID == id {
			return sb.Token == token
		}
	}
	return false
}

// ---- store ------------------------------------------------------------------

func openStore(t testing.TB, path string, fsync bool) *store.Store {
	t.Helper()
	s, err := store.Open(path, store.Options{UnsafeNoFsync: !fsync, Logger: quiet})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() }) // a second Close is the store's closed error: fine
	return s
}

func tempStorePath(t testing.TB) string { return filepath.Join(t.TempDir(), "state", "claims.json") }

// faultyStore is the real store with a switchable Put failure.
type faultyStore struct {
	pipeline.Store
	failPut atomic.Bool
	puts    atomic.Int64
}

func (s *faultyStore) Put(ctx context.Context, key string, c store.Claim) error {
	s.puts.Add(1)
	if s.failPut.Load() {
		return fmt.Errorf("injected: write %s: no space left on device", key)
	}
	return s.Store.Put(ctx, key, c)
}

// ---- engine -----------------------------------------------------------------

// testConfig is small and fast: few workers, retries in milliseconds.
func testConfig(sbx pipeline.Sandboxd, st pipeline.Store, rep *reporter) pipeline.Config {
	return pipeline.Config{
		Node: testNode, NodeKey: testKey,
		Shards: 2, Workers: 4, QueueDepth: 64,
		Sandboxd: sbx, Store: st, Reporter: rep, Observer: rep, Logger: quiet,
		ClaimRetry:     pool.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond},
		RequeueMin:     10 * time.Millisecond,
		RequeueMax:     50 * time.Millisecond,
		ReleaseTimeout: 5 * time.Second,
		VerifyInterval: 50 * time.Millisecond,
	}
}

// previousStateFile is the state file a previous process left: rows
// written through a store that is then closed, as across a restart. It
// returns the file's path.
func previousStateFile(t testing.TB, rows map[string]store.Claim) string {
	t.Helper()
	path := tempStorePath(t)
	prev := openStore(t, path, false)
	for key, c := range rows {
		if err := prev.Put(context.Background(), key, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := prev.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// startEngine builds the engine and runs it until the test ends.
func startEngine(t testing.TB, cfg pipeline.Config) *pipeline.Engine {
	t.Helper()
	e, err := pipeline.New(cfg)
	if err != nil {
		t.Fatalf("pipeline.New: %v", err)
	}
	runEngine(t, e)
	return e
}

// runEngine runs e until the test ends.
func runEngine(t testing.TB, e *pipeline.Engine) {
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran // Run returns once Shutdown has waited for every worker
	})
}

// rig is the usual set: emulator, root client, real store (no fsync), engine.
// newRig returns once the engine's startup listing is done, so that a test
// counting sandboxd calls never counts that listing by chance.
type rig struct {
	env   *simEnv
	store *store.Store
	rep   *reporter
	eng   *pipeline.Engine
}

func newRig(t testing.TB, sc sim.Config, mod func(*pipeline.Config)) *rig {
	t.Helper()
	env := newSim(t, sc)
	st := openStore(t, tempStorePath(t), false)
	rep := newReporter()
	cfg := testConfig(env.root, st, rep)
	if mod != nil {
		mod(&cfg)
	}
	eng := startEngine(t, cfg)
	select {
	case <-eng.Verified():
	case <-time.After(waitTimeout):
		t.Fatal("the engine's startup listing did not finish")
	}
	return &rig{env: env, store: st, rep: rep, eng: eng}
}

// intent is a Pod of key, generation uid, whose controller owner is the
// Sandbox named and UID'd owner ("" for a bare Pod).
func intent(key, uid, owner string) pipeline.Intent {
	ref := pipeline.PodRef{Key: pipeline.PodKey(key), UID: uid, OwnerUID: owner}
	if owner != "" {
		ref.Owner = "agents.x-k8s.io/v1alpha1/Sandbox/" + owner
	}
	return pipeline.Intent{Ref: ref, Spec: pipeline.ClaimSpec{Template: template, TTLSeconds: 3600}}
}

func create(t testing.TB, e *pipeline.Engine, it pipeline.Intent) {
	t.Helper()
	if err := e.Create(context.Background(), it); err != nil {
		t.Fatalf("Create %s (%s): %v", it.Ref.Key, it.Ref.UID, err)
	}
}

// allOwnersGone is the recorded-owner authority of a test whose deletes mean
// "the owner is gone": every recorded owner gives a release verdict.
func allOwnersGone(context.Context, pipeline.PodKey, pipeline.ClaimView) pipeline.Verdict {
	return pipeline.Verdict{Release: true, Reason: "owner-gone", FromOwner: true}
}

func verdict(release bool, reason string) func(context.Context) pipeline.Verdict {
	return func(context.Context) pipeline.Verdict { return pipeline.Verdict{Release: release, Reason: reason} }
}

// ---- reporter / observer fake --------------------------------------------

type event struct {
	kind    string // "running", "pending", "expired", "outcome", "decision", "pass"
	ref     pipeline.PodRef
	claim   pipeline.ClaimView
	adopted bool
	reason  string // pending reason, outcome, or decision kind/reason
	msg     string
}

// reporter records every Reporter and Observer call. It is goroutine-safe,
// and waitFor blocks (with a deadline) until a condition over the recorded
// events holds, woken by each new event: no sleeping.
type reporter struct {
	// onRunning, if set before the engine starts, runs inside Running.
	onRunning func(ref pipeline.PodRef, c pipeline.ClaimView)

	mu      sync.Mutex
	events  []event
	changed chan struct{}
}

func newReporter() *reporter { return &reporter{changed: make(chan struct{})} }

func (r *reporter) record(ev event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *reporter) Running(_ context.Context, ref pipeline.PodRef, c pipeline.ClaimView, adopted bool) {
	if r.onRunning != nil {
		r.onRunning(ref, c)
	}
	r.record(event{kind: "running", ref: ref, claim: c, adopted: adopted})
}

func (r *reporter) Pending(_ context.Context, ref pipeline.PodRef, reason, msg string) {
	r.record(event{kind: "pending", ref: ref, reason: reason, msg: msg})
}

func (r *reporter) Expired(_ context.Context, ref pipeline.PodRef, c pipeline.ClaimView) {
	r.record(event{kind: "expired", ref: ref, claim: c})
}

func (r *reporter) Renewed(_ context.Context, ref pipeline.PodRef, c pipeline.ClaimView) {
	r.record(event{kind: "renewed", ref: ref, claim: c})
}

func (r *reporter) Warning(_ context.Context, ref pipeline.PodRef, reason, msg string) {
	r.record(event{kind: "warning", ref: ref, reason: reason, msg: msg})
}

func (r *reporter) ClaimLatency(_ context.Context, outcome string, _ time.Duration) {
	r.record(event{kind: "outcome", reason: outcome})
}

func (r *reporter) Decision(_ context.Context, kind, reason string) {
	r.record(event{kind: "decision", reason: kind + "/" + reason})
}

func (r *reporter) LoopPass(loop string, _ time.Duration) {
	r.record(event{kind: "pass", reason: loop})
}

func (r *reporter) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// waitFor returns the events once cond holds, or fails the test at the
// deadline, naming what it waited for.
func (r *reporter) waitFor(t testing.TB, what string, cond func([]event) bool) []event {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		evs := append([]event(nil), r.events...)
		ch := r.changed
		r.mu.Unlock()
		if cond(evs) {
			return evs
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; events: %s", what, describe(evs))
			return nil
		}
	}
}

// running waits for Running of uid and returns that event.
func (r *reporter) running(t testing.TB, uid string) event {
	t.Helper()
	evs := r.waitFor(t, "Running of "+uid, func(evs []event) bool { return find(evs, "running", uid, "") >= 0 })
	return evs[find(evs, "running", uid, "")]
}

// pending waits for n Pending reports of uid with reason.
func (r *reporter) pending(t testing.TB, uid, reason string, n int) event {
	t.Helper()
	evs := r.waitFor(t, fmt.Sprintf("%d× Pending %s of %s", n, reason, uid), func(evs []event) bool {
		return countOf(evs, "pending", uid, reason) >= n
	})
	return evs[find(evs, "pending", uid, reason)]
}

// outcomes waits for n transaction outcomes of the given kind.
func (r *reporter) outcome(t testing.TB, outcome string, n int) {
	t.Helper()
	r.waitFor(t, fmt.Sprintf("%d× outcome %s", n, outcome), func(evs []event) bool {
		return countOf(evs, "outcome", "", outcome) >= n
	})
}

func matches(ev event, kind, uid, reason string) bool {
	return ev.kind == kind && (uid == "" || ev.ref.UID == uid) && (reason == "" || ev.reason == reason)
}

func find(evs []event, kind, uid, reason string) int {
	for i, ev := range evs {
		if matches(ev, kind, uid, reason) {
			return i
		}
	}
	return -1
}

func countOf(evs []event, kind, uid, reason string) int {
	n := 0
	for _, ev := range evs {
		if matches(ev, kind, uid, reason) {
			n++
		}
	}
	return n
}

func describe(evs []event) string {
	s := ""
	for _, ev := range evs {
		s += fmt.Sprintf("\n  %s %s/%s %s %s", ev.kind, ev.ref.Key, ev.ref.UID, ev.reason, ev.msg)
	}
	return s
}

// ---- orphan observer fake -----------------------------------------------

type orphanObs struct {
	mu       sync.Mutex
	verdicts [][3]int // {unknown, missing, foreign}
	scans    []bool
}

func (o *orphanObs) OrphanVerdicts(unknown, missing, foreign int) {
	o.mu.Lock()
	o.verdicts = append(o.verdicts, [3]int{unknown, missing, foreign})
	o.mu.Unlock()
}

func (o *orphanObs) OrphanScan(ok bool) {
	o.mu.Lock()
	o.scans = append(o.scans, ok)
	o.mu.Unlock()
}
