// Package kubetest runs a real etcd and kube-apiserver for tests, and the
// processes that test, benchmark and demo around them: vk-sandbox itself
// (BuildVKSandbox, VKSandbox), Jaeger and Prometheus.
//
// There is no kind and no Docker here: the binaries are built from the
// pinned tools modules by scripts/build-tools.sh and linked into the
// repository's bin/ folder. Start finds them there (or in $VK_TOOLS_BIN), and
// runs the script itself when they are missing, so a fresh clone works with
// only Go and the module proxy. Tests never skip for lack of binaries: a
// missing control plane is a failure, not a reason to pass vacuously.
//
// Lifecycle:
//
//	env := kubetest.StartT(t) // etcd + kube-apiserver, ready; stopped by t.Cleanup
//	cs := env.Clientset()
//	// ... exercise the API ...
//	_ = env.StopAPIServer()               // fault injection: etcd keeps the data
//	_ = env.StartAPIServer(ctx)           // same port, same certs, waits for /readyz
//
// Each Env owns a directory (Options.Dir) holding the etcd data, the
// generated credentials, the apiserver's self-signed certificates and the
// logs of both processes (etcd.log, kube-apiserver.log). Children run in
// their own process group, are killed as a group on Stop, and receive
// SIGKILL if the test binary dies (Pdeathsig), so an aborted `go test` does
// not leave control planes behind.
//
// Authentication is a static token file: Config carries an admin token in
// group system:masters, and Options.Users adds more tokens for
// authorization tests (see UserConfig). Authorization is RBAC.
//
// The apiserver dials kubelet APIs with a client certificate (CN
// KubeletClientUser, bound to system:kubelet-api-admin) signed by a CA of
// the Env's own, KubeletClientCA: a kubelet API that trusts that CA admits
// the apiserver's proxied exec, port-forward, logs and stats. It reaches a
// node at its InternalIP first and does not verify the kubelet's serving
// certificate.
package kubetest
