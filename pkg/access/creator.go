package access

import (
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// Annotations the API server itself writes on a namespace created with the label of a
// tenant namespace (the MutatingAdmissionPolicy wire.CreatorPolicyName): who created it, and
// the groups that user had. Nobody may set or change them otherwise (the
// ValidatingAdmissionPolicy of the same name).

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
	meta := metav1.ObjectMeta{Name: wire.CreatorPolicyName, Labels: wire.ManagedLabels()}
	namespaces := func(resources []string, ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
		return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops,
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: resources}},
		}}}
	}
	// The API server lets a namespace's status and finalize subresources change its
	// metadata (their strategies reset only spec, or only status): a writer of either
	// must not change the record either.
	namespaceWrites := []string{"namespaces", "namespaces/status", "namespaces/finalize"}
	annotation := func(obj, key string) string {
		return "(has(" + obj + ".metadata.annotations) && '" + key + "' in " + obj + ".metadata.annotations ? " + obj + ".metadata.annotations['" + key + "'] : '')"
	}
	recorded := creatorExpressions()
	return append([]client.Object{
		&admissionregistrationv1.MutatingAdmissionPolicy{TypeMeta: admissionType("MutatingAdmissionPolicy"), ObjectMeta: meta,
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: namespaces([]string{"namespaces"}, admissionregistrationv1.Create),
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "tenant-namespace",
					Expression: "has(object.metadata.labels) && '" + wire.TenantNamespaceLabel + "' in object.metadata.labels"}},
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
					ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "Object{metadata: Object.metadata{annotations: {" +
						recordedAnnotations(recorded) + "}}}"}}},
			}},
		&admissionregistrationv1.MutatingAdmissionPolicyBinding{TypeMeta: admissionType("MutatingAdmissionPolicyBinding"), ObjectMeta: meta,
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: wire.CreatorPolicyName}},
	}, denyingPolicy(wire.CreatorPolicyName, namespaces(namespaceWrites, admissionregistrationv1.Create, admissionregistrationv1.Update), nil, creatorValidations(recorded, annotation))...)
}

// creatorAnnotation is one annotation of the creator record and the CEL expression of its
// value, computed from the request's userInfo.
type creatorAnnotation struct{ key, value string }

// creatorExpressions are the creator record's annotations. Lists are encoded as
// cluster.EncodeCreatorList and EncodeCreatorExtra do (each item escaped and terminated,
// extra's keys sorted): a group such as "dev,system:masters" stays one group.
func creatorExpressions() []creatorAnnotation {
	escape := func(v string) string {
		return v + ".replace('%', '%25').replace(',', '%2C').replace('=', '%3D').replace(';', '%3B')"
	}
	list := func(l, item string) string { return l + ".map(" + item + ", " + escape(item) + " + ',').join('')" }
	extra := "request.userInfo.extra"
	return []creatorAnnotation{
		{wire.CreatedByAnnotation, "request.userInfo.username"},
		{wire.CreatedByUIDAnnotation, "(has(request.userInfo.uid) ? request.userInfo.uid : '')"},
		{wire.CreatedByGroupsAnnotation, "(has(request.userInfo.groups) ? " + list("request.userInfo.groups", "g") + " : '')"},
		{wire.CreatedByExtraAnnotation, "(has(" + extra + ") ? " + extra + ".map(k, k).sort().map(k, " + escape("k") + " + '=' + " +
			list(extra+"[k]", "v") + " + ';').join('') : '')"},
	}
}

func recordedAnnotations(recorded []creatorAnnotation) string {
	var fields []string
	for _, a := range recorded {
		fields = append(fields, "'"+a.key+"': "+a.value)
	}
	return strings.Join(fields, ", ")
}

// creatorValidations refuse, at creation, a creator annotation other than the API
// server's, and any change of one afterwards.
func creatorValidations(recorded []creatorAnnotation, annotation func(obj, key string) string) []admissionregistrationv1.Validation {
	var out []admissionregistrationv1.Validation
	unchanged := make([]string, 0, len(recorded))
	for _, a := range recorded {
		out = append(out, admissionregistrationv1.Validation{
			Expression: "request.operation != 'CREATE' || " + annotation("object", a.key) + " in ['', " + a.value + "]",
			Message:    a.key + " is written by the API server: it records who creates the namespace"})
		unchanged = append(unchanged, annotation("object", a.key)+" == "+annotation("oldObject", a.key))
	}
	return append(out, admissionregistrationv1.Validation{
		Expression: "request.operation != 'UPDATE' || (" + strings.Join(unchanged, " && ") + ")",
		Message:    "who created a namespace does not change"})
}
