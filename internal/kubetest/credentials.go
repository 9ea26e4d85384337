package kubetest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// User is an extra identity accepted by the apiserver's token file, for
// tests of RBAC and of what a non-admin client may do. Use UserConfig to
// get a client for it.
type User struct {
	Name   string   // user name, also used as the uid
	Token  string   // bearer token; must not contain commas, quotes or newlines
	Groups []string // optional groups, e.g. system:nodes
}

// credentials are the files the apiserver is started with. They are
// written once per Env and reused by StartAPIServer, so tokens and
// service-account signatures stay valid across a restart.
type credentials struct {
	adminToken string
	tokenFile  string
	saKey      string // RSA private key, signs service-account tokens
	saPub      string // its public key, verifies them
	kubelet    kubeletClient
}

func writeCredentials(dir string, users []User) (credentials, error) {
	c := credentials{
		adminToken: randomToken(),
		tokenFile:  filepath.Join(dir, "tokens.csv"),
		saKey:      filepath.Join(dir, "sa.key"),
		saPub:      filepath.Join(dir, "sa.pub"),
	}

	// Format: token,user,uid,"group1,group2". The admin is in
	// system:masters, which RBAC authorizes for everything.
	var b strings.Builder
	fmt.Fprintf(&b, "%s,admin,admin,\"system:masters\"\n", c.adminToken)
	for _, u := range users {
		for _, f := range append([]string{u.Name, u.Token}, u.Groups...) {
			if f == "" || strings.ContainsAny(f, ",\"\n\r") {
				return c, fmt.Errorf("user %q: token, name and groups must be non-empty without commas, quotes or newlines", u.Name)
			}
		}
		// An empty group column would be read as the group "".
		if len(u.Groups) == 0 {
			fmt.Fprintf(&b, "%s,%s,%s\n", u.Token, u.Name, u.Name)
		} else {
			fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", u.Token, u.Name, u.Name, strings.Join(u.Groups, ","))
		}
	}
	if err := os.WriteFile(c.tokenFile, []byte(b.String()), 0o600); err != nil {
		return c, fmt.Errorf("write token file: %w", err)
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return c, fmt.Errorf("generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return c, fmt.Errorf("marshal service-account public key: %w", err)
	}
	if err := writePEM(c.saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
		return c, err
	}
	if err := writePEM(c.saPub, "PUBLIC KEY", pub); err != nil {
		return c, err
	}
	if c.kubelet, err = writeKubeletClient(dir); err != nil {
		return c, err
	}
	return c, nil
}

func writePEM(path, typ string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
