package verify

import (
	"bytes"
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// CheckKubeconfig is the name of the check that the Identity's kubeconfig Secret exists
// and holds the Identity's credentials: what workloads of the consumer use.
const CheckKubeconfig = "kubeconfig"

// kubeconfig checks that the Identity's kubeconfig Secret exists, parses as a kubeconfig
// liqo-auth writes, and reaches the Identity's API server with its certificate and CA.
// Without it the identity is not usable by anything on the consumer, whatever the other
// checks say: after a manual flow with no consumer controller running, nothing writes it.
func (v verifier) kubeconfig(ctx context.Context, p peer, c *handshake.Side, id *authv1beta1.Identity) {
	name := handshake.KubeconfigSecret(id)
	var sec corev1.Secret
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: name}, &sec); err != nil {
		p.add(CheckKubeconfig, ResultFail, "kubeconfig Secret %s/%s: %v (no consumer controller made it: run liqo-auth-manager on this cluster, liqoctl install --with-manager, or liqoctl authenticate --remote-kubeconfig <provider>, which runs them for the command)", id.Namespace, name, err)
		return
	}
	if c.Controllers().Liqo() {
		p.add(CheckKubeconfig, ResultPass, "kubeconfig Secret %s/%s exists (written by Liqo's controllers)", id.Namespace, name)
		return
	}
	kc, err := authn.ReadKubeconfig(sec.Data[wire.KubeconfigField])
	switch {
	case err != nil:
		p.add(CheckKubeconfig, ResultFail, "kubeconfig Secret %s/%s: %v", id.Namespace, name, err)
	case kc.Server != id.Spec.AuthParams.APIServer:
		p.add(CheckKubeconfig, ResultFail, "kubeconfig Secret %s/%s reaches %s, not the Identity's API server %s", id.Namespace, name, kc.Server, id.Spec.AuthParams.APIServer)
	case !bytes.Equal(bytes.TrimSpace(kc.CertPEM), bytes.TrimSpace(id.Spec.AuthParams.SignedCRT)):
		p.add(CheckKubeconfig, ResultFail, "kubeconfig Secret %s/%s holds another certificate than the Identity's (renewal not yet followed, or the Secret was changed)", id.Namespace, name)
	case !bytes.Equal(bytes.TrimSpace(kc.CA), bytes.TrimSpace(id.Spec.AuthParams.CA)):
		p.add(CheckKubeconfig, ResultFail, "kubeconfig Secret %s/%s trusts another CA than the Identity's", id.Namespace, name)
	default:
		p.add(CheckKubeconfig, ResultPass, "kubeconfig Secret %s/%s holds the Identity's certificate, CA and API server", id.Namespace, name)
	}
}
