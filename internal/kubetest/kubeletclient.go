package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"path/filepath"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletClientUser is the CN of the apiserver's kubelet client
// certificate: the identity a kubelet API sees on every proxied exec,
// port-forward, log or stats request. Start binds it to the bootstrap role
// system:kubelet-api-admin, as a kubeadm cluster does.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// kubeletClient is the CA and the client certificate the apiserver dials
// kubelets with (--kubelet-client-certificate, --kubelet-client-key). The
// CA plays the cluster CA: a kubelet API that trusts it (vk-sandbox's
// --client-ca-file) authenticates the apiserver.
type kubeletClient struct {
	caFile, certFile, keyFile string
}

func writeKubeletClient(dir string) (kubeletClient, error) {
	k := kubeletClient{
		caFile:   filepath.Join(dir, "kubelet-client-ca.crt"),
		certFile: filepath.Join(dir, "kubelet-client.crt"),
		keyFile:  filepath.Join(dir, "kubelet-client.key"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return k, fmt.Errorf("kubelet client CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubetest-cluster-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return k, fmt.Errorf("kubelet client CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return k, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return k, fmt.Errorf("kubelet client key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: KubeletClientUser},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return k, fmt.Errorf("kubelet client certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return k, err
	}
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{k.caFile, "CERTIFICATE", caDER}, {k.certFile, "CERTIFICATE", der}, {k.keyFile, "EC PRIVATE KEY", keyDER}} {
		if err := writePEM(f.path, f.typ, f.der); err != nil {
			return k, err
		}
	}
	return k, nil
}

// kubeletClientArgs make the apiserver present the client certificate to
// kubelet APIs and reach a node at its InternalIP first (a virtual node's
// Hostname address is its name, which resolves nowhere). No
// --kubelet-certificate-authority: the apiserver then does not verify the
// kubelet's serving certificate, which vk-sandbox self-signs.
func (k kubeletClient) apiServerArgs() []string {
	return []string{
		"--kubelet-client-certificate=" + k.certFile,
		"--kubelet-client-key=" + k.keyFile,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
	}
}

// bindKubeletClient grants the kubelet client user what a kubeadm cluster
// grants it: system:kubelet-api-admin (nodes/proxy, nodes/stats, nodes/log),
// which a kubelet API checks with a SubjectAccessReview.
func (e *Env) bindKubeletClient(ctx context.Context) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubetest:" + KubeletClientUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: KubeletClientUser}},
	}
	_, err := e.clientset.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s: %w", KubeletClientUser, err)
	}
	return nil
}
