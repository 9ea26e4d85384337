package kube

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
)

// testCA is a CA that issues client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	c := testkit.Cert(t, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	return &testCA{cert: c.Leaf, key: c.PrivateKey.(*ecdsa.PrivateKey), pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})}
}

func (ca *testCA) client(t *testing.T, cn string, groups ...string) tls.Certificate {
	t.Helper()
	return testkit.Cert(t, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca.cert, ca.key)
}

// reviewer is the apiserver's review API: SubjectAccessReviews allow only
// user allowed on nodes, and TokenReviews authenticate nobody.
func reviewer(t *testing.T, allowed string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var out any
		switch r.URL.Path {
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			_ = json.NewDecoder(r.Body).Decode(&sar)
			sar.Status.Allowed = sar.Spec.User == allowed && sar.Spec.ResourceAttributes != nil && sar.Spec.ResourceAttributes.Resource == "nodes"
			out = &sar
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			_ = json.NewDecoder(r.Body).Decode(&tr)
			tr.Status.Authenticated = false
			out = &tr
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// kubeletAPI serves an "ok" handler behind the node's authn/authz with the
// client CA, against reviewer.
func kubeletAPI(t *testing.T, caPEM []byte, allowed string) *httptest.Server {
	t.Helper()
	serving, err := KubeletTLS("", "", "vk-node", "")
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, opt, err := clientCertAuth(serving, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: reviewer(t, allowed).URL})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := nodeutil.WebhookAuth(cs, "vk-node", opt)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nodeutil.WithAuth(auth, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})))
	srv.TLS = tlsCfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, cert *tls.Certificate, token string) (int, error) {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test checks client auth, not the serving cert
	if cert != nil {
		// Offered whatever CAs the server names: a client that only sends
		// a matching certificate would never test the server's check.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/stats/summary", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The apiserver's kubelet client certificate, signed by the cluster CA,
// authenticates as its CN and is then authorized; a certificate from any
// other CA is refused in the handshake; no certificate and no valid token
// is 401, as before.
func TestKubeletAPIVerifiesClientCertificatesAgainstTheClientCA(t *testing.T) {
	cluster := newTestCA(t, "cluster-ca")
	srv := kubeletAPI(t, cluster.pem, "kube-apiserver-kubelet-client")

	apiserver := cluster.client(t, "kube-apiserver-kubelet-client", "kubeadm:cluster-admins")
	if code, err := get(t, srv, &apiserver, ""); err != nil || code != 200 {
		t.Errorf("apiserver's client certificate: %d, %v; want 200", code, err)
	}
	other := cluster.client(t, "someone-else")
	if code, err := get(t, srv, &other, ""); err != nil || code != 403 {
		t.Errorf("a cluster-signed certificate the SubjectAccessReview denies: %d, %v; want 403", code, err)
	}
	forged := newTestCA(t, "cluster-ca").client(t, "kube-apiserver-kubelet-client")
	if code, err := get(t, srv, &forged, ""); err == nil {
		t.Errorf("a certificate from another CA with the right CN: %d, want a handshake failure", code)
	}
	if code, err := get(t, srv, nil, ""); err != nil || code != 401 {
		t.Errorf("anonymous: %d, %v; want 401", code, err)
	}
	if code, err := get(t, srv, nil, "not-a-real-token"); err != nil || code != 401 {
		t.Errorf("a token the TokenReview rejects: %d, %v; want 401", code, err)
	}
}

func TestClientCAMustHoldACertificate(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadClientCA(empty); err == nil {
		t.Error("a file without a PEM certificate was accepted")
	}
	if _, err := LoadClientCA(filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("a missing file was accepted")
	}
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, newTestCA(t, "ca").pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := LoadClientCA(good); err != nil || len(b) == 0 {
		t.Errorf("a CA file: %v", err)
	}
	if _, _, err := clientCertAuth(nil, newTestCA(t, "ca").pem); err == nil {
		t.Error("a client CA without serving TLS was accepted")
	}
}

// newNode wires the client CA into the listener's TLS, and refuses it
// together with NoAuth, which would make it meaningless.
func TestNewNodeWiresTheClientCA(t *testing.T) {
	serving, err := KubeletTLS("", "", "vk-node", "")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t, "cluster-ca").pem
	o := NodeOptions{Name: "vk-node", ListenAddr: "127.0.0.1:0", TLS: serving, Client: cs, EventRecorder: &record.FakeRecorder{}, ClientCA: ca}
	n, err := newNode(o, providerOver(t, nopEngine{}, ProviderOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if n.tls.ClientAuth != tls.VerifyClientCertIfGiven || n.tls.ClientCAs == nil {
		t.Errorf("listener TLS: client auth %v, CAs %v", n.tls.ClientAuth, n.tls.ClientCAs)
	}
	if serving.ClientCAs != nil {
		t.Error("the caller's TLS config was modified")
	}
	o.NoAuth = true
	if _, err := newNode(o, providerOver(t, nopEngine{}, ProviderOptions{})); err == nil {
		t.Error("a client CA with NoAuth was accepted")
	}
}
