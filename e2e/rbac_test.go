package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/kube"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// TestShippedClusterRoleIsEnough runs the provider as the ServiceAccount
// that manifests/rbac.yaml binds, with a token from the TokenRequest API,
// on the apiserver's RBAC authorizer: exactly the rights an installation
// gets, never admin. The whole path must work with them: the node
// registers and turns Ready, a Sandbox-owned Pod is claimed to Running
// with its Event, the NodeInventory is published, and once the owner is
// deleted the Pod's delete releases the VM. No request may be refused:
// the log holds no "forbidden". The role grants no Secrets, ConfigMaps or
// Services, so this also pins that nothing lists or watches them (a
// reflector refused would log it, and retry for ever).
func TestShippedClusterRoleIsEnough(t *testing.T) {
	cs, dyn := clients(t)
	kubeconfig := shippedRoleKubeconfig(t, cs)

	n := startNode(t, sim.Config{}, "--kubeconfig", kubeconfig, "--publish-inventory", "--publish-interval", "500ms")
	n.waitReady()
	ns := newNamespace(t)
	testkit.WaitForCtx(t, waitFor, "the NodeInventory", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(kube.NodeInventoryGVR()).Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil, nil
	})
	runThenOrphan(t, n, ns, "rbac")
	waitReleases(t, n, 1)
	if len(events(t, ns, "rbac", "SandboxClaimed")) == 0 {
		t.Error("no SandboxClaimed Event: Events are not written with the shipped role")
	}

	for _, line := range strings.Split(n.vk.Log(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("a request was refused with the shipped role: %s", line)
		}
	}
}

// shippedRoleKubeconfig installs manifests/rbac.yaml (and the
// NodeInventory CRD it grants) and returns a kubeconfig of the
// ServiceAccount it binds, the node's user in an installation (nodeUser).
func shippedRoleKubeconfig(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	if err := env.InstallCRDs(context.Background(), "../manifests/test/nodeinventory-crd.yaml"); err != nil {
		t.Fatal(err)
	}
	applyManifest(t, cs, "../manifests/rbac.yaml")
	return serviceAccountKubeconfig(t, cs, "vk-sandbox", "vk-sandbox")
}

// applyManifest creates every object of a multi-document YAML file with
// the admin client (an object that exists already is left as it is).
func applyManifest(t *testing.T, cs kubernetes.Interface, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := createObject(ctx, cs, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: create %T: %v", path, obj, err)
		}
	}
}

func createObject(ctx context.Context, cs kubernetes.Interface, obj runtime.Object) error {
	c := metav1.CreateOptions{}
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = cs.CoreV1().Namespaces().Create(ctx, o, c)
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, c)
	case *rbacv1.ClusterRole:
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, c)
	case *rbacv1.ClusterRoleBinding:
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, c)
	case *rbacv1.Role:
		_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, c)
	case *rbacv1.RoleBinding:
		_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, c)
	default:
		return fmt.Errorf("no create for %T", obj)
	}
	return err
}

// serviceAccountKubeconfig writes a kubeconfig holding a fresh token of
// the ServiceAccount, as an operator would make one for a node (README.md,
// "Deployment").
func serviceAccountKubeconfig(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: env.APIServerURL, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	cfg.CurrentContext = "default"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
