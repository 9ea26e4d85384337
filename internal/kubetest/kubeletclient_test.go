package kubetest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The apiserver's kubelet client certificate chains to KubeletClientCA as
// a client certificate of KubeletClientUser, the apiserver is started with
// it, and that user may use the kubelet API (system:kubelet-api-admin).
func TestKubeletClientCertificateChainsToTheCAAndIsBound(t *testing.T) {
	env := StartT(t)
	caPEM, err := os.ReadFile(env.KubeletClientCA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("KubeletClientCA holds no certificate")
	}
	pair, err := tls.LoadX509KeyPair(env.creds.kubelet.certFile, env.creds.kubelet.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || leaf.Subject.CommonName != KubeletClientUser {
		t.Errorf("client certificate %q: %v", leaf.Subject.CommonName, err)
	}
	args := env.apiServerArgs(1)
	for _, want := range []string{
		"--kubelet-client-certificate=" + env.creds.kubelet.certFile,
		"--kubelet-client-key=" + env.creds.kubelet.keyFile,
	} {
		if !slices.Contains(args, want) {
			t.Errorf("apiserver args lack %s", want)
		}
	}
	crb, err := env.Clientset().RbacV1().ClusterRoleBindings().Get(t.Context(), "kubetest:"+KubeletClientUser, metav1.GetOptions{})
	if err != nil || crb.RoleRef.Name != "system:kubelet-api-admin" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != KubeletClientUser {
		t.Errorf("binding %+v, %v", crb, err)
	}
}
