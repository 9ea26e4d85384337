package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/vk-sandbox/internal/kubetest"
)

// fleetGroup is the group of every node's user; it is bound to
// cluster-admin (what each node may do is not under test here).
const fleetGroup = "vk-fleet"

// nodeName and userName of fleet node i. Each node runs as its own user
// so that the apiserver's own metrics can tell the nodes apart: a
// FlowSchema per user (flowSchemaFor) makes
// apiserver_flowcontrol_dispatched_requests_total count each node's
// requests under its own flow_schema label. apiserver_request_total has
// no client label, and the user agent appears in no metric.
func nodeName(i int) string { return fmt.Sprintf("fleet-%03d", i) }
func userName(i int) string { return "vk-" + nodeName(i) }

// users are the token identities of n nodes, for kubetest.Options.Users.
func users(n int) []kubetest.User {
	out := make([]kubetest.User, n)
	for i := range out {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		out[i] = kubetest.User{Name: userName(i), Token: hex.EncodeToString(b), Groups: []string{fleetGroup}}
	}
	return out
}

// flowSchemaFor is the FlowSchema that classifies node i's requests.
func flowSchemaFor(i int) string { return userName(i) }

// setupIdentities binds the fleet group to cluster-admin and creates one
// FlowSchema per node user, in the "exempt" priority level: no
// apiserver-side queuing, as for the harness's own admin client (group
// system:masters, also exempt).
func setupIdentities(ctx context.Context, cs kubernetes.Interface, n int) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: fleetGroup},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: fleetGroup}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind %s: %w", fleetGroup, err)
	}
	all := []string{flowcontrolv1.VerbAll}
	for i := range n {
		fs := &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: flowSchemaFor(i)},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: flowcontrolv1.PriorityLevelConfigurationNameExempt},
				MatchingPrecedence:         100,
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
					Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: userName(i)}}},
					ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: all, APIGroups: []string{flowcontrolv1.APIGroupAll},
						Resources: []string{flowcontrolv1.ResourceAll}, ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery}}},
					NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: all, NonResourceURLs: []string{flowcontrolv1.NonResourceAll}}},
				}},
			},
		}
		if _, err := cs.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("flow schema %s: %w", fs.Name, err)
		}
	}
	return nil
}
