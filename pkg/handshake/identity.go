package handshake

import (
	"bytes"
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// ForgeIdentity builds the consumer's Identity from the provider's accepted Tenant, for
// the consumer's tenant namespace consumerTN, reaching the provider through proxy ("":
// none; always written, so that an apply takes the field from whoever set it). A Tenant
// whose status publishes another proxy than its spec asks for is refused
// (checkPublishedProxy).
func ForgeIdentity(providerID string, t *authv1beta1.Tenant, consumerTN, proxy string) (*authv1beta1.Identity, error) {
	if !t.Status.AuthParams.HasCertificate() {
		return nil, fmt.Errorf("the Tenant %s/%s has no certificate yet: %s", t.Namespace, t.Name, readyMessage(t.Status.Conditions))
	}
	if err := checkPublishedProxy(t); err != nil {
		return nil, err
	}
	// The namespace the Tenant is in, where its consumer's slices are copied: its status
	// is its writers', who may name another (helper-43's F3); only a Tenant not read from
	// a cluster (no namespace) goes by its status.
	ns := t.Namespace
	if ns == "" {
		ns = t.Status.TenantNamespace
	}
	params := t.Status.AuthParams.DeepCopy()
	params.ProxyURL = &proxy
	return &authv1beta1.Identity{
		TypeMeta: metav1.TypeMeta{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Identity"},
		ObjectMeta: metav1.ObjectMeta{Name: wire.IdentityName(providerID), Namespace: consumerTN,
			Labels: map[string]string{wire.RemoteClusterIDLabel: providerID}},
		Spec: authv1beta1.IdentitySpec{ClusterID: authv1beta1.ClusterID(providerID), Type: authv1beta1.ControlPlaneIdentityType,
			AuthParams: *params, Namespace: &ns},
	}, nil
}

func readyMessage(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, authv1beta1.ConditionReady); c != nil {
		return c.Reason + ": " + c.Message
	}
	return "no status yet"
}

// ApplyIdentity server-side applies the Identity on the consumer.
func ApplyIdentity(ctx context.Context, c *Side, id *authv1beta1.Identity) error {
	if err := cluster.Apply(ctx, c.Client, id, wire.FieldOwner); err != nil {
		return c.Explain(err, "applying the Identity")
	}
	return nil
}

// WaitIdentity waits until the consumer wrote the kubeconfig of the Identity for the
// certificate with serial (any certificate when serial is empty). applied is the Identity
// as this command applied it, and the wait starts from it (waitFrom).
func WaitIdentity(ctx context.Context, c *Side, applied *authv1beta1.Identity, serial string) (*authv1beta1.Identity, error) {
	return waitObject(ctx, c, client.ObjectKeyFromObject(applied), applied, &authv1beta1.IdentityList{}, "the consumer to write the kubeconfig of the Identity", "waiting for the Identity status",
		func(id *authv1beta1.Identity) (bool, string, error) {
			return identityWritten(id, serial, ptr.To(ptr.Deref(applied.Spec.AuthParams.ProxyURL, "")))
		})
}

// identityWritten decides whether the consumer wrote the kubeconfig of id for the
// certificate with serial (any when empty), is still at it, or refused it. pinned is the
// proxy this command pinned and applied (nil: none did): a refusal of that very proxy
// (ProxyNotPinned) was decided before the pin (a peering older than it), and the
// controller, which watches the record, decides again.
func identityWritten(id *authv1beta1.Identity, serial string, pinned *string) (bool, string, error) {
	if id.Status.ObservedGeneration < id.Generation {
		return false, "the consumer has not looked at the Identity yet: is liqo-auth-manager running there?", nil
	}
	ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
	switch {
	case ready == nil:
		return false, "no status yet", nil
	case ready.Status != metav1.ConditionTrue && ready.Reason == string(authn.ReasonProxyNotPinned) && pinned != nil && ptr.Deref(id.Spec.AuthParams.ProxyURL, "") == *pinned:
		return false, "the consumer decides again on the proxy pinned now", nil
	case ready.Status != metav1.ConditionTrue:
		return false, "", fmt.Errorf("the consumer refused the Identity (%s): %s", ready.Reason, ready.Message)
	case id.Status.KubeconfigSecretRef == nil || id.Status.Certificate == nil:
		return false, "no kubeconfig yet", nil
	case serial != "" && id.Status.Certificate.SerialNumber != serial:
		return false, "the kubeconfig holds an older certificate", nil
	}
	return true, "", nil
}

// WaitLiqoIdentity waits until Liqo's controllers on the consumer wrote the kubeconfig of
// the Identity holding certificate signedCRT: they set status.kubeconfigSecretRef and
// nothing else. applied is the Identity as this command applied it (waitFrom).
func WaitLiqoIdentity(ctx context.Context, c *Side, applied *authv1beta1.Identity, signedCRT []byte) (*authv1beta1.Identity, error) {
	return waitObject(ctx, c, client.ObjectKeyFromObject(applied), applied, &authv1beta1.IdentityList{}, "Liqo's controllers on the consumer to write the kubeconfig of the Identity", "waiting for the Identity status",
		func(id *authv1beta1.Identity) (bool, string, error) {
			switch {
			case !bytes.Equal(id.Spec.AuthParams.SignedCRT, signedCRT):
				return false, "the Identity holds another certificate", nil
			case id.Status.KubeconfigSecretRef == nil:
				return false, fmt.Sprintf("no kubeconfigSecretRef yet (%s run there)", c.Controllers()), nil
			}
			return true, "", nil
		})
}

// KubeconfigSecret names the kubeconfig Secret of an Identity: the one its status names,
// else the protocol's name.
func KubeconfigSecret(id *authv1beta1.Identity) string {
	if ref := id.Status.KubeconfigSecretRef; ref != nil && ref.Name != "" {
		return ref.Name
	}
	return wire.KubeconfigSecretName(id.Name)
}
