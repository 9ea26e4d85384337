package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// The main module has no apiextensions clientset, so CRDs go through the
// dynamic client as unstructured objects.
var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdWaitTimeout bounds the wait for a CRD to be served when ctx has no
// deadline of its own.
const crdWaitTimeout = 30 * time.Second

// InstallCRDs applies the CustomResourceDefinitions in the given YAML or
// JSON files (multi-document files are fine; a directory means every
// *.yaml, *.yml and *.json in it) and waits until each is Established and
// its served versions appear in discovery, so that clients and informers
// can use them at once. Applying is idempotent (server-side apply, field
// manager "kubetest"). A document that is not a CRD is an error.
func (e *Env) InstallCRDs(ctx context.Context, paths ...string) error {
	var docs [][]byte
	var sources []string
	for _, p := range paths {
		files, err := yamlFiles(p)
		if err != nil {
			return fmt.Errorf("kubetest: install CRDs: %w", err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("kubetest: install CRDs: %w", err)
			}
			docs = append(docs, b)
			sources = append(sources, f)
		}
	}
	return e.installCRDs(ctx, docs, sources)
}

// InstallCRDBytes is InstallCRDs for manifests already in memory, such as
// files embedded with go:embed.
func (e *Env) InstallCRDBytes(ctx context.Context, manifests ...[]byte) error {
	sources := make([]string, len(manifests))
	for i := range manifests {
		sources[i] = fmt.Sprintf("manifest #%d", i)
	}
	return e.installCRDs(ctx, manifests, sources)
}

func (e *Env) installCRDs(ctx context.Context, docs [][]byte, sources []string) error {
	var crds []*unstructured.Unstructured
	for i, d := range docs {
		objs, err := decodeCRDs(d, sources[i])
		if err != nil {
			return fmt.Errorf("kubetest: install CRDs: %w", err)
		}
		crds = append(crds, objs...)
	}
	if len(crds) == 0 {
		return errors.New("kubetest: install CRDs: no CustomResourceDefinition found")
	}
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("kubetest: install CRDs: %w", err)
	}
	for _, c := range crds {
		_, err := dyn.Resource(crdGVR).Apply(ctx, c.GetName(), c, metav1.ApplyOptions{FieldManager: "kubetest", Force: true})
		if err != nil {
			return fmt.Errorf("kubetest: apply CRD %s: %w", c.GetName(), err)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, crdWaitTimeout)
		defer cancel()
	}
	for _, c := range crds {
		if err := e.waitCRDServed(ctx, dyn, c); err != nil {
			return fmt.Errorf("kubetest: CRD %s: %w", c.GetName(), err)
		}
	}
	return nil
}

// waitCRDServed waits for the Established condition and then for every
// served version to be listed in discovery: Established alone can precede
// the discovery update that RESTMappers and informers rely on.
func (e *Env) waitCRDServed(ctx context.Context, dyn dynamic.Interface, want *unstructured.Unstructured) error {
	name := want.GetName()
	group, _, _ := unstructured.NestedString(want.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(want.Object, "spec", "names", "plural")
	var versions []string
	vs, _, _ := unstructured.NestedSlice(want.Object, "spec", "versions")
	for _, v := range vs {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); served {
			if n, _ := m["name"].(string); n != "" {
				versions = append(versions, n)
			}
		}
	}

	var last error
	err := wait.PollUntilContextCancel(ctx, readyPollInterval, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		if !crdEstablished(got) {
			last = errors.New("not Established yet")
			return false, nil
		}
		for _, v := range versions {
			rl, err := e.clientset.Discovery().ServerResourcesForGroupVersion(group + "/" + v)
			if err != nil {
				last = fmt.Errorf("discovery %s/%s: %w", group, v, err)
				return false, nil
			}
			if !slices.ContainsFunc(rl.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }) {
				last = fmt.Errorf("%s not yet in discovery for %s/%s", plural, group, v)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("not served: %w (last: %v)", err, last)
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// decodeCRDs splits a YAML or JSON stream into CRDs, skipping empty
// documents.
func decodeCRDs(data []byte, source string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 0; ; i++ {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if gvk := u.GroupVersionKind(); gvk.Group != crdGVR.Group || gvk.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: document %d is %s %q, not a CustomResourceDefinition", source, i, gvk.Kind, u.GetName())
		}
		if u.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d: CustomResourceDefinition without a name", source, i)
		}
		out = append(out, u)
	}
}

// yamlFiles expands a directory to its manifest files, sorted; a file is
// returned as is.
func yamlFiles(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, en := range entries {
		switch strings.ToLower(filepath.Ext(en.Name())) {
		case ".yaml", ".yml", ".json":
			if !en.IsDir() {
				files = append(files, filepath.Join(p, en.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no .yaml, .yml or .json files", p)
	}
	return files, nil // ReadDir sorts by name
}
