package kube

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// LoadClientCA reads the PEM bundle of --client-ca-file. It is read once,
// at start: a rotated CA takes a restart, as the serving certificate does.
func LoadClientCA(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--client-ca-file %s: no PEM certificate in it", path)
	}
	return b, nil
}

// clientCertAuth makes the kubelet API verify client certificates against
// caPEM, as a kubelet does: the TLS handshake checks a certificate that is
// given (one that does not chain to the CA is refused there), and the
// returned option has nodeutil's authenticator turn a verified certificate
// into a user before it tries bearer tokens. A client without a certificate
// still needs a token: anonymous requests get 401 either way.
func clientCertAuth(serving *tls.Config, caPEM []byte) (*tls.Config, nodeutil.WebhookAuthOption, error) {
	if serving == nil {
		return nil, nil, errors.New("kubelet API: a client CA needs the API served over TLS")
	}
	ca, err := dynamiccertificates.NewStaticCAContent("client-ca-file", caPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet API client CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, nil, errors.New("kubelet API client CA: no PEM certificate in it")
	}
	cfg := serving.Clone()
	cfg.ClientCAs = roots
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	opt := func(c *nodeutil.WebhookAuthConfig) error {
		c.AuthnConfig.ClientCertificateCAContentProvider = ca
		return nil
	}
	return cfg, opt, nil
}
