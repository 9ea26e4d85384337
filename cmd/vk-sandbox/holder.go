package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool/store"
)

// nodeNameSuffix is what the host name is given to make the default node
// name: the virtual node never takes the host's own Node's name.
const nodeNameSuffix = "-sandboxd"

// notInSubdomain is every run of characters a DNS-1123 subdomain may not
// hold.
var notInSubdomain = regexp.MustCompile(`[^a-z0-9.-]+`)

// defaultNodeName is the host's default --node-name, "<hostname>-sandboxd":
// unique per host, so two hosts left at the default never serve one Node.
// The host name is lower-cased and each run of characters a Node name may
// not hold becomes "-"; a name that is still not a DNS-1123 subdomain
// (nor a valid holder Lease name) is an error.
func defaultNodeName(hostname func() (string, error)) (string, error) {
	host, err := hostname()
	if err != nil {
		return "", fmt.Errorf("no --node-name, and the host name cannot be read to make one: %w", err)
	}
	name := notInSubdomain.ReplaceAllString(strings.ToLower(strings.TrimSpace(host)), "-")
	name = strings.Trim(name, ".-") + nodeNameSuffix
	if err := checkNodeName(name); err != nil {
		return "", fmt.Errorf("no --node-name, and the host name %q does not make one: %w", host, err)
	}
	return name, nil
}

// checkNodeName refuses a name that is not a valid Node name, or whose
// holder Lease name would not be valid.
func checkNodeName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("node name %q: %s", name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(kube.HolderLeaseName(name)); len(errs) > 0 {
		return fmt.Errorf("node name %q is too long for its holder Lease %q: %s", name, kube.HolderLeaseName(name), strings.Join(errs, "; "))
	}
	return nil
}

// instanceIDFile holds this host's instance id, beside the state file.
const instanceIDFile = "holder-id"

// holderIdentity is this process's holder identity, "<hostname>/<instance
// id>". The instance id is kept in the state directory, so the same host
// with the same state file is the same holder across restarts, SIGKILL
// included, and takes its own lease back at once; another state file (a
// second process on the host, or another host) is another holder. It must
// be called with the state file open: the state file's lock is what keeps
// two processes from sharing the id.
func holderIdentity(stateDir string, hostname func() (string, error)) (string, error) {
	host, err := hostname()
	if err != nil {
		return "", fmt.Errorf("holder identity: the host name: %w", err)
	}
	path := filepath.Join(stateDir, instanceIDFile)
	b, err := os.ReadFile(path)
	id := strings.TrimSpace(string(b))
	switch {
	case err == nil && validInstanceID(id):
	case err == nil || errors.Is(err, fs.ErrNotExist):
		// A missing or unreadable id makes a new one: this host is then a
		// new holder, whose own old lease (if any) it waits out.
		raw := make([]byte, 8)
		_, _ = rand.Read(raw)
		id = hex.EncodeToString(raw)
		if err := writeFileSynced(path, []byte(id+"\n")); err != nil {
			return "", fmt.Errorf("holder identity: %w", err)
		}
	default:
		return "", fmt.Errorf("holder identity: %w", err)
	}
	return host + "/" + id, nil
}

func validInstanceID(id string) bool {
	_, err := hex.DecodeString(id)
	return err == nil && len(id) == 16
}

// writeFileSynced writes path whole through a temporary file, renamed into
// place once synced, and fsyncs the directory: a rename whose directory was
// not synced can be undone by a power cut, and a host that lost its id is
// a new holder, refused until its own old lease runs out.
func writeFileSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return store.FsyncDir(filepath.Dir(path))
}
