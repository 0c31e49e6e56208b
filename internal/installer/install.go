package installer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/crds"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// InstallOptions are what liqoctl install sets up.
type InstallOptions struct {
	// Namespace is the Liqo namespace.
	Namespace string
	// ClusterID is the wanted cluster ID (random when empty; kept when installed).
	ClusterID string
	// KeyAlgorithm of the cluster key pair, when it is created.
	KeyAlgorithm authn.Algorithm
	// Config is how this cluster presents itself to consumers.
	Config cluster.Config
	// TakeOver applies the CRDs, namespace and roles even where another installation
	// (Liqo's Helm chart, another tool) manages them. Without it they are kept as they are.
	TakeOver bool
}

// InstallObjects are the objects of an installation that are the same on every apply:
// CRDs, the Liqo namespace, the ClusterRoles, the identity liqo-auth-manager runs as (its
// ServiceAccount and bindings) and, when set, the liqo-auth-config ConfigMap.
func InstallObjects(o InstallOptions) ([]client.Object, error) {
	defs, err := crds.Load()
	if err != nil {
		return nil, err
	}
	var objs []client.Object
	for _, d := range defs {
		d.TypeMeta = metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"}
		if d.Labels == nil {
			d.Labels = map[string]string{}
		}
		maps.Copy(d.Labels, wire.ManagedLabels())
		objs = append(objs, d)
	}
	objs = append(objs,
		&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: o.Namespace, Labels: liqoNamespaceLabels()}},
		access.ForgeControlPlaneClusterRole(), access.ForgeClusterWideRole())
	// The admission policies before the rights they bound: applied in this order (and
	// kubectl applies the release manifest in it), no moment has the manager's
	// ServiceAccount holding its RBAC rules (escalate and bind on tenant namespaces' Roles,
	// RoleBindings anywhere) without the policies that keep them to what its controllers
	// make already created.
	objs = append(objs, access.ForgePeeringUserPolicy(o.Namespace)...)
	objs = append(objs, access.ForgeManagerPolicy(o.Namespace)...)
	objs = append(objs, access.ForgeCreatorPolicies()...)
	objs = append(objs, access.ForgeManagerClusterRoles()...)
	objs = append(objs, access.ForgeManagerIdentity(o.Namespace)...)
	objs = append(objs, ForgeManagerLeasePriority(o.Namespace)...)
	if o.Config.APIServerURL != "" || len(o.Config.APIServerCA) > 0 || o.Config.CertificateLifetime > 0 || o.Config.NonceTTL > 0 || o.Config.RequireApproval {
		objs = append(objs, cluster.ForgeConfigMap(o.Namespace, o.Config))
	}
	return objs, nil
}

// ForgeManagerLeasePriority is the API server's priority level liqo-auth-manager and the
// FlowSchema that puts in it the Lease requests of the manager's ServiceAccount in the
// Liqo namespace (the leader's Lease, or its presence without leader election). Without
// them those requests share the ServiceAccount's level (workload-low) and queue behind
// the manager's own: in a flood of handshakes a renewal could wait past its deadline, and
// the leader stop in the middle of them.
//
// A level of its own, not Kubernetes' leader-election level: a stolen manager token there
// held every seat of that level with slow requests (their body sent late) and
// kube-controller-manager's renewals waited past their deadline (helper-8,
// TestAttack51StolenManagerTokenHoldsOnlyItsOwnLevel). This one has a few seats, lends
// none and borrows none: whoever holds the token delays only the manager's own Lease.
func ForgeManagerLeasePriority(liqoNS string) []client.Object {
	return []client.Object{
		&flowcontrolv1.PriorityLevelConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: flowcontrolv1.SchemeGroupVersion.String(), Kind: "PriorityLevelConfiguration"},
			ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName, Labels: wire.ManagedLabels()},
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
				Type: flowcontrolv1.PriorityLevelEnablementLimited,
				Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
					// About 5 seats of a default API server's 600: a renewal every 2 s needs one.
					NominalConcurrencyShares: ptr.To[int32](2),
					LendablePercent:          ptr.To[int32](0),
					BorrowingLimitPercent:    ptr.To[int32](0),
					LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
						Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: 16}},
				},
			},
		},
		&flowcontrolv1.FlowSchema{
			TypeMeta:   metav1.TypeMeta{APIVersion: flowcontrolv1.SchemeGroupVersion.String(), Kind: "FlowSchema"},
			ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName, Labels: wire.ManagedLabels()},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: wire.ManagerName},
				// Before the ServiceAccounts' own schemas (service-accounts: 9000), after
				// Kubernetes' leader-election schemas (100, 200).
				MatchingPrecedence:  250,
				DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
					Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
						ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: liqoNS, Name: wire.ManagerName}}},
					ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
						APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
						Verbs: []string{"get", "create", "update"}, Namespaces: []string{liqoNS},
					}},
				}},
			},
		},
	}
}

// liqoNamespaceLabels are the labels of the Liqo namespace when this project makes it: the
// cluster key lives there, and nothing in it needs more than Kubernetes' restricted Pod
// Security Standard (the manager passes it), so the API server refuses any pod that would.
func liqoNamespaceLabels() map[string]string {
	l := wire.ManagedLabels()
	maps.Copy(l, map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/audit":   "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	})
	return l
}

// InstallResult says what an installation holds.
type InstallResult struct {
	ClusterID      string
	Fingerprint    string
	CreatedID      bool
	CreatedKey     bool
	AppliedObjects int
	// Kept are the objects another installation manages, left as they are.
	Kept []Kept
	// Unsupported are the objects this cluster's API server does not serve (a
	// MutatingAdmissionPolicy before Kubernetes 1.36): what they do is not done.
	Unsupported []string
	// PoliciesPending says the API server did not enforce the admission policies within a
	// few seconds of their creation.
	PoliciesPending bool
	// ForeignCRDs: some CRD of authentication.liqo.io is another installation's (Liqo's):
	// its schema, not this project's, decides what the API server keeps, and Liqo's
	// controllers, not liqo-auth-manager, are the ones to run here.
	ForeignCRDs bool
}

// EnsureInstalled applies the install objects, waits for the CRDs to be established and
// served, and ensures the cluster ID and key pair (both kept when they exist).
func EnsureInstalled(ctx context.Context, c client.WithWatch, o InstallOptions) (*InstallResult, error) {
	if o.Namespace == "" {
		o.Namespace = wire.DefaultLiqoNamespace
	}
	if validateInstallOptionsErr := validateInstallOptions(o); validateInstallOptionsErr != nil {
		return nil, validateInstallOptionsErr
	}
	objs, err := InstallObjects(o)
	if err != nil {
		return nil, err
	}
	res := &InstallResult{}
	if applyInstallObjectsErr := applyInstallObjects(ctx, c, o, objs, res); applyInstallObjectsErr != nil {
		return nil, applyInstallObjectsErr
	}
	if waitCRDsEstablishedErr := WaitCRDsEstablished(ctx, c); waitCRDsEstablishedErr != nil {
		return nil, waitCRDsEstablishedErr
	}
	if warmCRDsErr := warmCRDs(ctx, c); warmCRDsErr != nil {
		return nil, warmCRDsErr
	}
	res.PoliciesPending = !waitCreatorPolicies(ctx, c, len(res.Unsupported) > 0)
	if res.ClusterID, res.CreatedID, err = cluster.EnsureClusterID(ctx, c, o.Namespace, o.ClusterID); err != nil {
		return nil, err
	}
	key, created, err := cluster.EnsureClusterKey(ctx, c, o.Namespace, o.KeyAlgorithm)
	if err != nil {
		return nil, err
	}
	res.CreatedKey = created
	if res.Fingerprint, err = authn.Fingerprint(key.Public()); err != nil {
		return nil, err
	}
	return res, nil
}

// validateInstallOptions refuses, before anything is applied, a cluster ID or an API
// server URL given but invalid.
func validateInstallOptions(o InstallOptions) error {
	if o.ClusterID != "" {
		if err := cluster.ValidateClusterID(o.ClusterID); err != nil {
			return err
		}
	}
	if o.Config.APIServerURL != "" {
		if err := authn.ValidateServerURL(o.Config.APIServerURL); err != nil {
			return err
		}
	}
	return nil
}

// applyInstallObjects applies objs in order, counting them in res: without TakeOver, an
// object another installation owns is kept (and listed); a MutatingAdmissionPolicy (and
// its binding) the API server does not serve is listed as unsupported and skipped.
func applyInstallObjects(ctx context.Context, c client.WithWatch, o InstallOptions, objs []client.Object, res *InstallResult) error {
	for _, obj := range objs {
		if !o.TakeOver {
			kept, err := keepForeign(ctx, c, obj, res)
			if err != nil {
				return err
			}
			if kept {
				continue
			}
		}
		if applyErr := cluster.Apply(ctx, c, obj, wire.FieldOwner); applyErr != nil {
			if _, isMAP := obj.(*admissionregistrationv1.MutatingAdmissionPolicy); meta.IsNoMatchError(applyErr) && isMAP {
				res.Unsupported = append(res.Unsupported, "MutatingAdmissionPolicy "+obj.GetName())
				continue
			}
			if _, isBinding := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding); meta.IsNoMatchError(applyErr) && isBinding {
				continue
			}
			return applyErr
		}
		res.AppliedObjects++
	}
	return nil
}

// keepForeign reports whether obj exists and is another installation's, and then lists it
// in res as kept (a CRD kept makes res.ForeignCRDs).
func keepForeign(ctx context.Context, c client.WithWatch, obj client.Object, res *InstallResult) (bool, error) {
	owner, err := foreignExisting(ctx, c, obj)
	if err != nil {
		return false, err
	}
	if owner == "" {
		return false, nil
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return false, err
	}
	res.Kept = append(res.Kept, Kept{Kind: gvk.Kind, Name: obj.GetName(), Owner: owner})
	_, isCRD := obj.(*apiextensionsv1.CustomResourceDefinition)
	res.ForeignCRDs = res.ForeignCRDs || isCRD
	return true, nil
}

// WaitCRDsEstablished waits until every embedded CRD is established, or, with names, those
// of them only (Liqo's kinds, which another installation may have created).
func WaitCRDsEstablished(ctx context.Context, c client.Client, names ...string) error {
	defs, err := crds.Load()
	if err != nil {
		return err
	}
	for _, d := range defs {
		if len(names) > 0 && !slices.Contains(names, d.Name) {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var got apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: d.Name}, &got); err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", d.Name, err)
		}
	}
	return nil
}

// warmCRDs opens one watch on each CRD resource. The API server builds the watch cache of
// a resource on its first watch, which takes about a second: paying it here, once, keeps
// it out of the first handshake.
func warmCRDs(ctx context.Context, c client.WithWatch) error {
	var eg errgroup.Group
	for _, list := range []client.ObjectList{&authv1beta1.TenantList{}, &authv1beta1.IdentityList{}, &authv1beta1.ResourceSliceList{}} {
		eg.Go(func() error {
			// Discovery may lag behind the Established condition for a moment: until the
			// group is served, the client finds no mapping for the kind.
			var last error
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				w, err := c.Watch(ctx, list, &client.ListOptions{Limit: 1})
				if err != nil {
					last = err
					return false, client.IgnoreNotFound(ignoreNoMatch(err))
				}
				w.Stop()
				return true, nil
			})
			if err != nil {
				return fmt.Errorf("waiting for %T to be served: %w (last: %v)", list, err, last)
			}
			return nil
		})
	}
	return eg.Wait()
}

func ignoreNoMatch(err error) error {
	if meta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// policyGrace bounds the wait for new admission policies to be enforced: the API server
// loads them in the background, usually within a second.
const policyGrace = 15 * time.Second

// waitCreatorPolicies waits until the API server enforces the admission policies that
// record who creates a tenant namespace, with server-side dry runs: a namespace claiming
// a creator is refused, or (mutating policy served: withoutMAP false) has it written over.
// It reports whether they are enforced.
func waitCreatorPolicies(ctx context.Context, c client.Client, withoutMAP bool) bool {
	probe := func(labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "liqo-auth-policy-probe", Labels: labels,
			Annotations: map[string]string{wire.CreatedByAnnotation: "liqo-auth-probe"}}}
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, policyGrace, true, func(ctx context.Context) (bool, error) {
		if err := c.Create(ctx, probe(nil), client.DryRunAll); err == nil {
			return false, nil
		}
		if withoutMAP {
			return true, nil
		}
		labelled := probe(cluster.TenantNamespaceLabels("liqo-auth-probe"))
		if err := c.Create(ctx, labelled, client.DryRunAll); err != nil {
			return false, nil //nolint:nilerr // a refused labelled probe is the answer "not in force yet": poll again
		}
		return labelled.Annotations[wire.CreatedByAnnotation] != "liqo-auth-probe", nil
	})
	return err == nil
}
