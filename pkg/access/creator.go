package access

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// Annotations the API server itself writes on a namespace created with the label of a
// tenant namespace (the MutatingAdmissionPolicy CreatorPolicyName): who created it, and
// the groups that user had. Nobody may set or change them otherwise (the
// ValidatingAdmissionPolicy of the same name).
const (
	// CreatorPolicyName names the admission policies (and their bindings) that record the
	// creator of tenant namespaces.
	CreatorPolicyName = "liqo-auth-namespace-creator"
)

func admissionType(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: kind}
}

// creates and updates matches the creates and updates of resources of group at version.
func createsAndUpdates(group, version string, resources ...string) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: resources},
		},
	}}}
}

// denyingPolicy is the ValidatingAdmissionPolicy name, failing closed, that checks
// validations on the requests match and conditions select, and the binding that makes
// its failures deny.
func denyingPolicy(name string, match *admissionregistrationv1.MatchResources, conditions []admissionregistrationv1.MatchCondition,
	validations []admissionregistrationv1.Validation) []client.Object {
	meta := metav1.ObjectMeta{Name: name, Labels: wire.ManagedLabels()}
	return []client.Object{
		&admissionregistrationv1.ValidatingAdmissionPolicy{TypeMeta: admissionType("ValidatingAdmissionPolicy"), ObjectMeta: meta,
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: match, MatchConditions: conditions, Validations: validations}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{TypeMeta: admissionType("ValidatingAdmissionPolicyBinding"), ObjectMeta: meta,
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}},
	}
}

// ForgeCreatorPolicies are the admission policies that record who created a tenant
// namespace. A namespace's labels are the protocol's wire format, which anyone who may
// create a namespace can set: the API server's own record of the creator lets this
// cluster's manager make it a tenant namespace only when its creator could have made the
// tenant record itself (an administrator running Liqo's liqoctl, which knows nothing of
// records). The mutating policy writes the annotations at creation; the validating one
// refuses them written by anyone else, or changed.
func ForgeCreatorPolicies() []client.Object {
	meta := metav1.ObjectMeta{Name: CreatorPolicyName, Labels: wire.ManagedLabels()}
	namespaces := func(ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
		return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops,
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}}},
		}}}
	}
	annotation := func(obj, key string) string {
		return "(has(" + obj + ".metadata.annotations) && '" + key + "' in " + obj + ".metadata.annotations ? " + obj + ".metadata.annotations['" + key + "'] : '')"
	}
	groups := "(has(request.userInfo.groups) ? request.userInfo.groups.join(',') : '')"
	return append([]client.Object{
		&admissionregistrationv1.MutatingAdmissionPolicy{TypeMeta: admissionType("MutatingAdmissionPolicy"), ObjectMeta: meta,
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: namespaces(admissionregistrationv1.Create),
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "tenant-namespace",
					Expression: "has(object.metadata.labels) && '" + wire.TenantNamespaceLabel + "' in object.metadata.labels"}},
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
					ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "Object{metadata: Object.metadata{annotations: {'" +
						wire.CreatedByAnnotation + "': request.userInfo.username, '" + wire.CreatedByGroupsAnnotation + "': " + groups + "}}}"}}},
			}},
		&admissionregistrationv1.MutatingAdmissionPolicyBinding{TypeMeta: admissionType("MutatingAdmissionPolicyBinding"), ObjectMeta: meta,
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: CreatorPolicyName}},
	}, denyingPolicy(CreatorPolicyName, namespaces(admissionregistrationv1.Create, admissionregistrationv1.Update), nil, []admissionregistrationv1.Validation{
		{Expression: "request.operation != 'CREATE' || " + annotation("object", wire.CreatedByAnnotation) + " in ['', request.userInfo.username]",
			Message: wire.CreatedByAnnotation + " is written by the API server: it names who creates the namespace"},
		{Expression: "request.operation != 'CREATE' || " + annotation("object", wire.CreatedByGroupsAnnotation) + " in ['', " + groups + "]",
			Message: wire.CreatedByGroupsAnnotation + " is written by the API server: it names the groups of who creates the namespace"},
		{Expression: "request.operation != 'UPDATE' || (" + annotation("object", wire.CreatedByAnnotation) + " == " + annotation("oldObject", wire.CreatedByAnnotation) +
			" && " + annotation("object", wire.CreatedByGroupsAnnotation) + " == " + annotation("oldObject", wire.CreatedByGroupsAnnotation) + ")",
			Message: "who created a namespace does not change"},
	})...)
}
