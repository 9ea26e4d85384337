package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"

	"github.com/cocoonstack/vk-sandbox/pipeline"
)

func TestAnnotationContract(t *testing.T) {
	ok := map[string]struct {
		ann  map[string]string
		want int64
	}{
		"ttl absent means while the Pod lives": {map[string]string{AnnTemplate: "py"}, pipeline.TTLWhilePodLives},
		"explicit zero: sandboxd picks":        {map[string]string{AnnTemplate: "py", AnnTTL: "0"}, 0},
		"explicit ttl":                         {map[string]string{AnnTemplate: "py", AnnTTL: " 600 "}, 600},
		"runtime sandboxd":                     {map[string]string{AnnTemplate: "py", AnnRuntime: "sandboxd"}, pipeline.TTLWhilePodLives},
	}
	for name, c := range ok {
		spec, err := ParseClaimSpec("ns/p", c.ann)
		if err != nil || spec.TTLSeconds != c.want || spec.Template != "py" {
			t.Errorf("%s: spec=%+v err=%v", name, spec, err)
		}
	}
	bad := map[string]map[string]string{
		"no template":      {},
		"blank template":   {AnnTemplate: "  "},
		"negative ttl":     {AnnTemplate: "py", AnnTTL: "-1"},
		"non-integer ttl":  {AnnTemplate: "py", AnnTTL: "1.5"},
		"another runtime":  {AnnTemplate: "py", AnnRuntime: "kata"},
		"empty runtime":    {AnnTemplate: "py", AnnRuntime: ""},
		"ttl with garbage": {AnnTemplate: "py", AnnTTL: "10s"},
	}
	for name, ann := range bad {
		_, err := ParseClaimSpec("ns/p", ann)
		var ae *annotationError
		if err == nil || !errdefs.IsInvalidInput(err) || !errors.As(err, &ae) || !strings.Contains(err.Error(), "ns/p") {
			t.Errorf("%s: err=%v, want an InvalidInput annotationError naming the pod", name, err)
		}
	}
	spec, _ := ParseClaimSpec("ns/p", map[string]string{AnnTemplate: "py", annNet: "isolated", annSize: "xl"})
	if spec.Net != "isolated" || spec.Size != "xl" {
		t.Errorf("axes not carried: %+v", spec)
	}
}

func FuzzParseClaimSpec(f *testing.F) {
	for _, s := range []string{"", "0", "86400", "-1", "1e3", " 7 ", "99999999999999999999"} {
		f.Add("py", s, "sandboxd")
	}
	f.Fuzz(func(t *testing.T, tmpl, ttl, runtime string) {
		spec, err := ParseClaimSpec("ns/p", map[string]string{AnnTemplate: tmpl, AnnTTL: ttl, AnnRuntime: runtime})
		if err == nil && (spec.TTLSeconds < 0 || spec.Template == "" || runtime != RuntimeSandboxd) {
			t.Fatalf("accepted an invalid spec: %+v", spec)
		}
	})
}
