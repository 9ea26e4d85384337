package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
	"github.com/cocoonstack/vk-sandbox/internal/testkit"
	"github.com/cocoonstack/vk-sandbox/pool/sim"
)

// The Helm chart (charts/vk-sandbox) is rendered by Helm's own library and
// its alerts are read by Prometheus's own rule parser, both in the tool
// vk-chartcheck (tools/chartcheck, built by scripts/build-tools.sh), so
// that this module never depends on Helm or Prometheus.

const (
	chartDir        = "../charts/vk-sandbox"
	chartAllValues  = "testdata/chart-values-all.yaml"
	monitoringCRDs  = "testdata/monitoring-crds"
	shippedRBAC     = "../manifests/rbac.yaml"
	shippedDaemon   = "../manifests/daemonset.yaml"
	chartAlertsFile = chartDir + "/files/alerts.yaml"
)

// chartcheck returns bin/vk-chartcheck, building it if it is missing.
func chartcheck(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin, err := kubetest.Binary(ctx, "vk-chartcheck")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// renderChart runs `vk-chartcheck render` (helm template --include-crds)
// and returns the rendered objects, CRDs first, in order.
func renderChart(t *testing.T, bin, release, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runChartcheck(bin, append(append([]string{"render", "-release", release, "-namespace", ns}, args...), chartDir)...)
	if err != nil {
		t.Fatalf("render %s: %v", chartDir, err)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatalf("rendered %s: %v\n%s", chartDir, err, out)
	}
	return objs
}

func runChartcheck(bin string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, errors.New(strings.TrimSpace(err.Error() + ": " + stderr.String()))
	}
	return out, nil
}

// decodeObjects splits a multi-document YAML stream into objects,
// skipping empty documents (a template whose condition is off).
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		if err := utilyaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// applyObjects creates what Helm would: CRDs first (waiting until they are
// served), then every other object with server-side apply, so the
// apiserver validates each against its schema.
func applyObjects(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	var crds [][]byte
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			b, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			crds = append(crds, b)
		}
	}
	if len(crds) > 0 {
		if err := env.InstallCRDBytes(ctx, crds...); err != nil {
			t.Fatal(err)
		}
	}
	cs, dyn := clients(t)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
		ri := dyn.Resource(m.Resource)
		var apply func() error
		if m.Scope.Name() == "namespace" {
			apply = func() error {
				_, err := ri.Namespace(o.GetNamespace()).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "chart-test", Force: true})
				return err
			}
		} else {
			apply = func() error {
				_, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "chart-test", Force: true})
				return err
			}
		}
		if err := apply(); err != nil {
			t.Errorf("apply %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func toTyped(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// TestHelmChartAppliesToAPIServer renders the chart with its defaults and
// with every value set (testdata/chart-values-all.yaml), and applies each
// rendering to the real apiserver (the chart ships no CRD): every object with server-side apply (the ServiceMonitor and
// PrometheusRule kinds come from testdata/monitoring-crds). Each rendering
// must carry the hardening of docs/install.md, grant exactly the rules of
// manifests/rbac.yaml, and name the objects it is given; the
// ServiceMonitor's own identity may GET /metrics and nothing more.
func TestHelmChartAppliesToAPIServer(t *testing.T) {
	bin := chartcheck(t)
	if err := env.InstallCRDs(context.Background(), monitoringCRDs); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, release string
		args          []string
		wantKinds     []string
		containers    []string
		secret, sa    string
	}{
		{
			name: "defaults", release: "vk-sandbox-defaults",
			wantKinds:  []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "Role", "RoleBinding", "ServiceAccount"},
			containers: []string{"vk-sandbox"},
			secret:     "vk-sandbox-sandboxd-token", sa: "vk-sandbox-defaults",
		},
		{
			name: "all-options", release: "vk-sandbox-all", args: []string{"-f", chartAllValues},
			wantKinds:  []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "PrometheusRule", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "ServiceMonitor"},
			containers: []string{"vk-sandbox", "kube-rbac-proxy"},
			secret:     "sandboxd-root-token", sa: "vk-sandbox-node",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := newNamespace(t)
			objs := renderChart(t, bin, c.release, ns, c.args...)
			if got := kinds(objs); !slices.Equal(got, c.wantKinds) {
				t.Errorf("rendered kinds %v, want %v", got, c.wantKinds)
			}
			applyObjects(t, objs)

			var ds appsv1.DaemonSet
			toTyped(t, find(t, objs, "DaemonSet")[0], &ds)
			checkHardenedDaemonSet(t, "chart "+c.name, &ds)
			admitPodOf(t, ns, &ds)
			pod := ds.Spec.Template.Spec
			var names []string
			for _, ctr := range pod.Containers {
				names = append(names, ctr.Name)
			}
			if !slices.Equal(names, c.containers) {
				t.Errorf("containers %v, want %v", names, c.containers)
			}
			if pod.ServiceAccountName != c.sa {
				t.Errorf("serviceAccountName %q, want %q", pod.ServiceAccountName, c.sa)
			}
			var secret string
			for _, v := range pod.Volumes {
				if v.Secret != nil {
					secret = v.Secret.SecretName
				}
			}
			if secret != c.secret {
				t.Errorf("the token Secret is %q, want %q", secret, c.secret)
			}
			checkChartRBAC(t, objs, ns, ds.Name, c.sa)
			if len(find(t, objs, "ServiceMonitor")) > 0 {
				checkMetricsReader(t, ns, ds.Name+"-metrics-reader")
			}
		})
	}

	t.Run("serviceMonitor-needs-authProxy", func(t *testing.T) {
		_, err := runChartcheck(bin, "render", "-set", "serviceMonitor.enabled=true", chartDir)
		if err == nil || !strings.Contains(err.Error(), "serviceMonitor.enabled needs metrics.authProxy.enabled") {
			t.Errorf("render with serviceMonitor and no authProxy: err=%v, want the chart's refusal", err)
		}
	})
}

// chartAppVersion is the appVersion of charts/vk-sandbox/Chart.yaml.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: "?([^"\s]+)"?$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Chart.yaml has no appVersion")
	}
	return string(m[1])
}

// releasedImage is the image the chart and the manifest run by default.
const releasedImage = "ghcr.io/cocoonstack/vk-sandbox"

// A render with nothing set runs the released image at the chart's
// appVersion, and makes the state directory 0700 before vk-sandbox
// starts; values.schema.json refuses a value of the wrong type or name,
// and an empty node.nameSuffix.
func TestHelmChartDefaultsInstallAsTheyAre(t *testing.T) {
	bin := chartcheck(t)
	var ds appsv1.DaemonSet
	toTyped(t, find(t, renderChart(t, bin, "vk-sandbox", "vk-sandbox"), "DaemonSet")[0], &ds)
	pod := ds.Spec.Template.Spec
	if want := releasedImage + ":" + chartAppVersion(t); pod.Containers[0].Image != want {
		t.Errorf("default image %q, want %q", pod.Containers[0].Image, want)
	}
	checkStateDirInit(t, "chart defaults", &ds)
	checkStateUser(t, "chart defaults", &ds)

	toTyped(t, find(t, renderChart(t, bin, "vk-sandbox", "vk-sandbox", "-set", "image.tag=1.2.3"), "DaemonSet")[0], &ds)
	if want := releasedImage + ":1.2.3"; ds.Spec.Template.Spec.Containers[0].Image != want {
		t.Errorf("image with a tag set: %q, want %q", ds.Spec.Template.Spec.Containers[0].Image, want)
	}
	toTyped(t, find(t, renderChart(t, bin, "vk-sandbox", "vk-sandbox", "-set", "stateDirInit.enabled=false"), "DaemonSet")[0], &ds)
	if n := len(ds.Spec.Template.Spec.InitContainers); n != 0 {
		t.Errorf("stateDirInit.enabled=false renders %d init containers", n)
	}

	for _, c := range []struct{ set, want string }{
		{"logLevel=verbose", "logLevel"},
		{"node.kubeletPort=70000", "kubeletPort"},
		{"imge.tag=1.0", "imge"},
		{"image.repository=", "repository"},
		{"stateDir=relative/dir", "stateDir"},
		// An empty suffix would name the virtual node after the host's own
		// Node, which the process then refuses to serve on every host.
		{"node.nameSuffix=", "nameSuffix"},
	} {
		_, err := runChartcheck(bin, "render", "-set", c.set, chartDir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("render with %s: err=%v, want a refusal naming %s", c.set, err, c.want)
		}
	}
}

// checkStateDirInit: an init container makes the directory vk-sandbox
// keeps its state file in 0700, on the same volume.
func checkStateDirInit(t *testing.T, what string, ds *appsv1.DaemonSet) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	mountOf := func(mounts []corev1.VolumeMount) string {
		for _, m := range mounts {
			if m.Name == "state" {
				return m.MountPath
			}
		}
		return ""
	}
	dir := mountOf(pod.Containers[0].VolumeMounts)
	if len(pod.InitContainers) != 1 || dir == "" {
		t.Fatalf("%s: %d init containers, state mounted at %q; want one that prepares it", what, len(pod.InitContainers), dir)
	}
	ic := pod.InitContainers[0]
	if !slices.Equal(ic.Command, []string{"chmod", "0700", dir}) || mountOf(ic.VolumeMounts) != dir {
		t.Errorf("%s: init container %s runs %q with the state volume at %q; want chmod 0700 %s", what, ic.Name, ic.Command, mountOf(ic.VolumeMounts), dir)
	}
	if sc := ic.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("%s: init container %s does not run as root, the hostPath's owner", what, ic.Name)
	}
}

// TestHelmChartLints runs `helm lint --strict` (Helm's own lint action)
// on the chart with its defaults and with every value set: a warning is a
// failure, as an error is.
func TestHelmChartLints(t *testing.T) {
	bin := chartcheck(t)
	for _, args := range [][]string{nil, {"-f", chartAllValues}} {
		out, err := runChartcheck(bin, append(append([]string{"lint"}, args...), chartDir)...)
		if err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s", args, err, out)
		}
	}
}

// checkChartRBAC: the chart's ClusterRole and Role (named after the
// release's full name) grant what manifests/rbac.yaml grants
// (TestShippedClusterRoleIsEnough runs the provider with those), bound to
// the chart's ServiceAccount. Any other ClusterRole may grant GET /metrics
// and nothing else.
func checkChartRBAC(t *testing.T, objs []*unstructured.Unstructured, ns, fullname, sa string) {
	t.Helper()
	b, err := os.ReadFile(shippedRBAC)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := decodeObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	named := func(kind, name string) *unstructured.Unstructured {
		for _, o := range find(t, objs, kind) {
			if o.GetName() == name {
				return o
			}
		}
		t.Fatalf("the chart renders no %s %s", kind, name)
		return nil
	}
	for kind, name := range map[string]string{"ClusterRole": fullname, "Role": fullname + "-node-lease"} {
		want := find(t, shipped, kind)[0].Object["rules"]
		if got := named(kind, name).Object["rules"]; !reflect.DeepEqual(got, want) {
			t.Errorf("the chart's %s rules differ from %s's", kind, shippedRBAC)
		}
	}
	for kind, name := range map[string]string{"ClusterRoleBinding": fullname, "RoleBinding": fullname + "-node-lease"} {
		subjects, _, _ := unstructured.NestedSlice(named(kind, name).Object, "subjects")
		want := []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": ns}}
		if !reflect.DeepEqual(subjects, want) {
			t.Errorf("%s subjects %v, want %v", kind, subjects, want)
		}
	}
	metricsOnly := []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}
	for _, o := range find(t, objs, "ClusterRole") {
		if o.GetName() != fullname && !reflect.DeepEqual(o.Object["rules"], metricsOnly) {
			t.Errorf("ClusterRole %s grants %v, want GET /metrics only", o.GetName(), o.Object["rules"])
		}
	}
}

// checkMetricsReader asks the apiserver, as kube-rbac-proxy does, whether
// the ServiceMonitor's identity may GET /metrics (yes, and another
// ServiceAccount may not) and a path beyond it (no).
func checkMetricsReader(t *testing.T, ns, sa string) {
	t.Helper()
	cs, _ := clients(t)
	for _, c := range []struct {
		sa, path string
		want     bool
	}{{sa, "/metrics", true}, {sa, "/debug/pprof/", false}, {"someone-else", "/metrics", false}} {
		user := "system:serviceaccount:" + ns + ":" + c.sa
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: c.path, Verb: "get"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != c.want {
			t.Errorf("%s GET %s allowed=%v, want %v (%s)", user, c.path, r.Status.Allowed, c.want, r.Status.Reason)
		}
	}
}

// checkHardenedDaemonSet: system-node-critical, the RuntimeDefault seccomp
// profile, no privilege escalation or capabilities, and /metrics (plain
// HTTP, unauthenticated) bound to loopback, with the probes aimed there.
func checkHardenedDaemonSet(t *testing.T, what string, ds *appsv1.DaemonSet) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("%s: priorityClassName %q, want system-node-critical", what, pod.PriorityClassName)
	}
	if sc := pod.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: the Pod has no RuntimeDefault seccomp profile", what)
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: container %s may escalate, keeps capabilities or writes its root file system", what, c.Name)
		}
	}
	vk := pod.Containers[0]
	var metricsAddr string
	found := false
	for _, e := range vk.Env {
		if e.Name == "VK_METRICS_ADDR" {
			metricsAddr, found = e.Value, true
		}
	}
	for _, a := range vk.Args {
		if v, ok := strings.CutPrefix(a, "--metrics-addr="); ok {
			metricsAddr, found = v, true
		}
	}
	host, port, err := net.SplitHostPort(metricsAddr)
	if !found || err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("%s: the metrics address is %q (set %v), want a loopback host:port", what, metricsAddr, found)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": vk.LivenessProbe, "readiness": vk.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Host != host || p.HTTPGet.Port.String() != port {
			t.Errorf("%s: the %s probe does not reach the metrics listener at %s", what, name, metricsAddr)
		}
	}
}

// TestDaemonSetManifestHardened: manifests/daemonset.yaml carries the
// same hardening as the chart, and the apiserver accepts it (server-side
// dry run, strict field validation, in a fresh namespace).
func TestDaemonSetManifestHardened(t *testing.T) {
	ds := shippedDaemonSet(t)
	checkHardenedDaemonSet(t, shippedDaemon, ds)
	checkStateDirInit(t, shippedDaemon, ds)
	if want := releasedImage + ":" + chartAppVersion(t); ds.Spec.Template.Spec.Containers[0].Image != want {
		t.Errorf("%s runs %q, want the chart's default %q", shippedDaemon, ds.Spec.Template.Spec.Containers[0].Image, want)
	}
	ds.Namespace = newNamespace(t)
	cs, _ := clients(t)
	if _, err := cs.AppsV1().DaemonSets(ds.Namespace).Create(context.Background(), ds, metav1.CreateOptions{
		DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}); err != nil {
		t.Errorf("%s: %v", shippedDaemon, err)
	}
	admitPodOf(t, ds.Namespace, ds)
}

// shippedDaemonSet reads manifests/daemonset.yaml, which holds one
// DaemonSet.
func shippedDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	b, err := os.ReadFile(shippedDaemon)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(b)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: %d objects, err %v; want one DaemonSet", shippedDaemon, len(objs), err)
	}
	var ds appsv1.DaemonSet
	toTyped(t, objs[0], &ds)
	return &ds
}

// admitPodOf creates, as a server-side dry run, the Pod the DaemonSet
// controller would make, so that Pod admission runs on it: the Priority
// plugin resolves priorityClassName (system-node-critical outside
// kube-system) and Pod validation checks the probes and the security
// context as a kubelet would receive them.
func admitPodOf(t *testing.T, ns string, ds *appsv1.DaemonSet) {
	t.Helper()
	cs, _ := clients(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ds.Name + "-", Namespace: ns, Labels: ds.Spec.Template.Labels},
		Spec:       *ds.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = "a-sandboxd-host"
	got, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("the Pod of DaemonSet %s is refused: %v", ds.Name, err)
	}
	if got.Spec.Priority == nil || *got.Spec.Priority < 2000000000 {
		t.Errorf("the Pod of DaemonSet %s has priority %v, want system-node-critical's", ds.Name, got.Spec.Priority)
	}
}

// TestChartValuesDocumented: every value of values.yaml has a "# -- "
// comment (on itself or on the map it belongs to) and a row in the table
// of charts/vk-sandbox/README.md, and the table names no other.
func TestChartValuesDocumented(t *testing.T) {
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented, undocumented := valuesKeys(string(values))
	for _, k := range undocumented {
		t.Errorf("values.yaml: %s has no \"# --\" comment, nor does a map above it", k)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = true
	}
	for _, k := range documented {
		if !rows[k] {
			t.Errorf("README.md has no row for %s", k)
		}
		delete(rows, k)
	}
	for k := range rows {
		t.Errorf("README.md has a row for %s, which values.yaml does not document", k)
	}
	if len(documented) < 20 {
		t.Errorf("only %d documented values found: is values.yaml parsed right?", len(documented))
	}
}

// valuesKeys reads values.yaml as text (two spaces a level). documented
// lists the keys with a "# --" comment block right above them; undocumented
// the leaves with no such key at or above them.
func valuesKeys(text string) (documented, undocumented []string) {
	type level struct {
		indent int
		path   string
		doc    bool
	}
	keyRe := regexp.MustCompile(`^( *)([A-Za-z0-9_.-]+):(.*)$`)
	var stack []level
	comment := false
	var pending *level // the last key, a leaf unless a deeper key follows
	flush := func(next int) {
		if pending != nil && next <= pending.indent && !pending.doc {
			undocumented = append(undocumented, pending.path)
		}
		pending = nil
	}
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case trimmed == "":
			comment = false
			continue
		case strings.HasPrefix(trimmed, "#"):
			comment = comment || strings.HasPrefix(trimmed+" ", "# -- ")
			continue
		}
		m := keyRe.FindStringSubmatch(l)
		if m == nil { // a list item or a continuation
			comment = false
			continue
		}
		indent := len(m[1])
		flush(indent)
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		lv := level{indent: indent, path: m[2], doc: comment}
		if len(stack) > 0 {
			parent := stack[len(stack)-1]
			lv.path = parent.path + "." + m[2]
			lv.doc = lv.doc || parent.doc
		}
		if comment {
			documented = append(documented, lv.path)
		}
		stack = append(stack, lv)
		p := lv
		pending = &p
		comment = false
	}
	flush(-1)
	return documented, undocumented
}

// ruleInfo is one rule as `vk-chartcheck rules` prints it.
type ruleInfo struct {
	Group   string              `json:"group"`
	Alert   string              `json:"alert"`
	Record  string              `json:"record"`
	Expr    string              `json:"expr"`
	Metrics []string            `json:"metrics"`
	Labels  map[string][]string `json:"labels"`
}

func parseRules(t *testing.T, bin, file string) []ruleInfo {
	t.Helper()
	out, err := runChartcheck(bin, "rules", file)
	if err != nil {
		t.Fatalf("Prometheus's rule parser refuses %s: %v", file, err)
	}
	var rules []ruleInfo
	if err := json.Unmarshal(out, &rules); err != nil {
		t.Fatal(err)
	}
	return rules
}

// TestAlertsUseExportedMetrics parses the chart's alerts with Prometheus's
// rule parser, both files/alerts.yaml and the PrometheusRule the chart
// renders from it, and checks each expression against a real scrape of
// the vk-sandbox binary: every metric it selects is exported (a histogram
// as _bucket, _sum and _count), with every label it matches on. The
// binary does the work that makes each family appear: a claim, a release,
// orphan scans and NodeInventory publishes.
func TestAlertsUseExportedMetrics(t *testing.T) {
	bin := chartcheck(t)
	rules := parseRules(t, bin, chartAlertsFile)

	var rendered *unstructured.Unstructured
	for _, o := range renderChart(t, bin, "vk-sandbox", "vk-sandbox", "-set", "prometheusRule.enabled=true") {
		if o.GetKind() == "PrometheusRule" {
			rendered = o
		}
	}
	if rendered == nil {
		t.Fatal("prometheusRule.enabled=true renders no PrometheusRule")
	}
	b, err := rendered.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "prometheusrule.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if fromChart := parseRules(t, bin, f); !reflect.DeepEqual(fromChart, rules) {
		t.Errorf("the rendered PrometheusRule's rules differ from %s", chartAlertsFile)
	}

	// The alerts docs/install.md lists, by the metric each must read.
	alerting := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		for _, m := range r.Metrics {
			alerting[m] = true
		}
	}
	for _, m := range []string{
		"vksandbox_claim_duration_seconds_count",        // claim failures, state file failing
		"vksandbox_store_fsync_duration_seconds_bucket", // slow fsync
		"vksandbox_queue_depth",                         // queue depth
		"vksandbox_vk_queue_oldest_item_seconds",        // queue age
		"vksandbox_decisions_total",                     // lease expiries
		"vksandbox_orphan_sandboxes",                    // orphans reported
		"vksandbox_orphan_claims",
	} {
		if !alerting[m] {
			t.Errorf("no alert reads %s", m)
		}
	}

	if err := env.InstallCRDs(context.Background(), "../manifests/test/nodeinventory-crd.yaml"); err != nil {
		t.Fatal(err)
	}
	args, scrapeURL := metricsArgs(t)
	n := startNode(t, sim.Config{}, append(args, "--orphan-scan-interval", "200ms", "--publish-inventory", "--publish-interval", "200ms")...)
	ns := newNamespace(t)
	createPod(t, sandboxPod(ns, "alerts", n.Name))
	waitRunning(t, ns, "alerts")
	deletePod(t, ns, "alerts") // a bare Pod: released, a decision
	// Poll: the orphan gauges and the inventory counter appear after their
	// first loop, the decision after the release.
	var missing []string
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	testkit.Eventually(ctx, func(context.Context) (bool, error) {
		s := scrape(t, scrapeURL)
		missing = missing[:0]
		for _, r := range rules {
			for _, m := range r.Metrics {
				if m == "up" && r.Alert == "VkSandboxDown" {
					continue // Prometheus's own series; TestDownAlertFires (e2e/observability) runs this rule
				}
				if len(s[m]) == 0 {
					missing = append(missing, r.Alert+": "+m)
					continue
				}
				for _, l := range r.Labels[m] {
					if !slices.ContainsFunc(s[m], func(sl sampleLine) bool { _, ok := sl.labels[l]; return ok }) {
						missing = append(missing, r.Alert+": "+m+" label "+l)
					}
				}
			}
		}
		return len(missing) == 0, nil
	})
	if len(missing) > 0 {
		t.Errorf("alerts read series the binary does not export (after %s): %v", waitFor, missing)
	}
}
