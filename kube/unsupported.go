package kube

import (
	"context"
	"errors"
	"io"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// ErrNotImplemented answers the interactive kubelet surfaces: a sandboxd
// VM is reached at its own address, not through the kubelet API.
var ErrNotImplemented = errors.New("not implemented: sandboxd VMs do not serve logs, exec, attach or port-forward through the kubelet API")

func (p *Provider) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return nil, ErrNotImplemented
}

func (p *Provider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return ErrNotImplemented
}

func (p *Provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return ErrNotImplemented
}

func (p *Provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return ErrNotImplemented
}

// GetStatsSummary is an empty summary: sandboxd does not report VM stats.
func (p *Provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{StartTime: metav1.NewTime(time.Now())}}, nil
}

func (p *Provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) { return nil, nil }
