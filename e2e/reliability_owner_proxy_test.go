package e2e

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// r2Proxy sits between one vk-sandbox process and the apiserver. It can
// hold owner GETs (a named GET of an agents.x-k8s.io object, which only the
// delete authorizer makes) until the client gives up or the hold is lifted;
// everything else passes straight through, watches included. When the
// apiserver is down the proxy answers 502, as a load balancer would.
type r2Proxy struct {
	srv        *httptest.Server
	rp         *httputil.ReverseProxy
	Kubeconfig string // points vk-sandbox at the proxy

	mu   sync.Mutex
	gate chan struct{} // nil: not holding; closed by release

	ownerGets   atomic.Int64 // owner GETs seen
	held        atomic.Int64 // owner GETs currently held
	abandoned   atomic.Int64 // held owner GETs the client gave up on (its timeout)
	ownerErrors atomic.Int64 // owner GETs the apiserver could not serve
	otherErrors atomic.Int64 // any other request the apiserver could not serve

	podsCut     atomic.Bool  // see cutPodWatch
	podsRefused atomic.Int64 // Pod watches and lists refused while cut

	down        atomic.Bool  // see goDown
	downRefused atomic.Int64 // requests answered 503 while down
}

func newR2Proxy(t *testing.T) *r2Proxy {
	t.Helper()
	target, err := url.Parse(env.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := &r2Proxy{}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 256, ForceAttemptHTTP2: false},
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away; nothing to answer
			}
			if isOwnerGet(r) {
				p.ownerErrors.Add(1)
			} else {
				p.otherErrors.Add(1)
			}
			http.Error(w, "apiserver unreachable: "+err.Error(), http.StatusBadGateway)
		},
	}
	// TLS, not plain HTTP: clientcmd applies a kubeconfig's credentials
	// only to a TLS cluster (client-go tools/clientcmd/client_config.go),
	// so an http:// proxy would make vk-sandbox system:anonymous.
	p.srv = httptest.NewTLSServer(p)
	t.Cleanup(func() {
		p.release()
		p.srv.CloseClientConnections()
		p.srv.Close()
	})

	kc := clientcmdapi.NewConfig()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.srv.URL, CertificateAuthorityData: caPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: env.Config.BearerToken}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "admin"}
	kc.CurrentContext = "proxy"
	p.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig-proxy")
	if err := clientcmd.WriteToFile(*kc, p.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

// isOwnerGet matches GET /apis/agents.x-k8s.io/<v>/namespaces/<ns>/<plural>/<name>.
func isOwnerGet(r *http.Request) bool {
	if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/apis/agents.x-k8s.io/") {
		return false
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	return len(parts) == 7 && parts[3] == "namespaces" && r.URL.Query().Get("watch") == ""
}

func (p *r2Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.down.Load() {
		p.downRefused.Add(1)
		http.Error(w, "apiserver unavailable", http.StatusServiceUnavailable)
		return
	}
	if p.podsCut.Load() && r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods" {
		p.podsRefused.Add(1)
		if r.URL.Query().Get("watch") != "" {
			// As the apiserver answers a watch from a resource version it
			// no longer holds: the client must list again.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","message":"too old resource version","code":410}`)
			return
		}
		http.Error(w, "apiserver unavailable", http.StatusServiceUnavailable)
		return
	}
	if isOwnerGet(r) {
		p.ownerGets.Add(1)
		if gate := p.gateChan(); gate != nil {
			p.held.Add(1)
			select {
			case <-gate:
				p.held.Add(-1)
			case <-r.Context().Done():
				p.held.Add(-1)
				p.abandoned.Add(1)
				return
			}
		}
	}
	p.rp.ServeHTTP(w, r)
}

func (p *r2Proxy) gateChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gate
}

// hold makes owner GETs wait from now on.
func (p *r2Proxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil {
		p.gate = make(chan struct{})
	}
}

// release forwards the held owner GETs and stops holding.
func (p *r2Proxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}

// cutPodWatch ends the node's Pod watch (it closes every connection of
// the node) and, until restorePodWatch, answers its Pod watches 410 Gone
// and its Pod lists 503. Its informer then misses whatever happens to its
// Pods meanwhile, and catches up by a relist once restored.
func (p *r2Proxy) cutPodWatch() {
	p.podsCut.Store(true)
	p.srv.CloseClientConnections()
}

func (p *r2Proxy) restorePodWatch() { p.podsCut.Store(false) }

// goDown answers every request 503 until comeBack, as a load balancer in
// front of an apiserver that is down (a control-plane outage or upgrade).
func (p *r2Proxy) goDown() { p.down.Store(true) }

func (p *r2Proxy) comeBack() { p.down.Store(false) }
