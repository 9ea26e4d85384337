package kubetest

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Client rate limits for Config. client-go's default (5 QPS, burst 10)
// would make a load test measure the client, not the system.
const (
	clientQPS   = 1000
	clientBurst = 2000
)

// initClients builds Config, the kubeconfig file and the clientset once the
// apiserver is ready, and proves with one request that the CA from certDir
// verifies the serving certificate.
func (e *Env) initClients(ctx context.Context) error {
	ca, err := e.readCA()
	if err != nil {
		return err
	}
	e.Config = &rest.Config{
		Host:            e.APIServerURL,
		BearerToken:     e.creds.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		QPS:             clientQPS,
		Burst:           clientBurst,
		UserAgent:       "kubetest",
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
		return fmt.Errorf("verify admin client against %s: %w", e.APIServerURL, err)
	}
	e.clientset = cs

	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	return e.WriteKubeconfig(e.Kubeconfig, e.creds.adminToken)
}

// WriteKubeconfig writes a kubeconfig file for this apiserver that
// authenticates with token: the admin's, or one of Options.Users', for a
// process (such as vk-sandbox) that should run as that user.
func (e *Env) WriteKubeconfig(path, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: e.APIServerURL, CertificateAuthorityData: e.Config.TLSClientConfig.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "user"}
	kc.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
