package peering

import (
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// What a Peering's reconcile reads, gathered in stages, and the ordered pure checks that
// decide whether a handshake may run: the shape of providerslice's decide.go.

// input is what the decision reads. Stage one (always): the Peering, the record that this
// Peering owns (nil: none yet) and the Identity of that provider. Stage two, only when the
// Identity is not ready: the bootstrap Secret and what it holds.
type input struct {
	peering *authv1beta1.Peering
	now     time.Time
	// clusterID is this cluster's (the consumer's).
	clusterID string

	// owned is the consumer's tenant record of the provider this Peering owns.
	owned *cluster.TenantRecord
	// identity is the consumer's control-plane Identity of that provider (nil: none).
	identity *authv1beta1.Identity

	// secret is the bootstrap Secret (nil: not found).
	secret *corev1.Secret
	// kubeconfig is what the Secret holds, parsed (nil with kubeconfigErr when it does
	// not parse or carries anything but embedded certificate data).
	kubeconfig    *authn.KubeconfigInfo
	kubeconfigErr error
	// cert is the bootstrap credential's client certificate.
	cert *x509.Certificate
	// consumedBy is a record in which this cluster used that certificate already (nil:
	// none).
	consumedBy *cluster.TenantRecord

	// retireTried says that this reconcile's handshake already had the peering user retire
	// itself (whether it could or not): it is not tried twice in one reconcile.
	retireTried bool
}

// ranHandshake says whether this Peering's own handshake made the peering it owns: the
// record (which no status writer reaches) lists a bootstrap credential its handshake used.
// Without it, a ready Identity proves nothing: an Identity and its status have writers of
// their own.
func (in *input) ranHandshake() bool {
	if in.owned == nil || in.owned.Peering == nil {
		return false
	}
	for _, b := range in.owned.Peering.Consumed {
		if b.Peering == string(in.peering.UID) {
			return true
		}
	}
	return false
}

// verdict is what a check decides: the Peering's state and Ready condition, and when to
// come back (0: on the next event only).
type verdict struct {
	state   authv1beta1.PeeringState
	reason  string
	message string
	requeue time.Duration
}

// Requeue intervals of a Peering. What it waits for is mostly on the provider, where
// nothing is watched, or is a person's act.
const (
	// secretRetry: the bootstrap Secret is missing. A Secret labelled liqo.io/remote-cluster-id
	// wakes the Peering at once; one without that label is found at this pace.
	secretRetry = 10 * time.Second
	// providerRetry: the provider could not be reached, or the handshake failed on
	// something that may pass (a conflict, a timeout).
	providerRetry = 10 * time.Second
	// approvalRecheck: the provider's administrator has not approved this cluster yet.
	approvalRecheck = 10 * time.Second
	// deniedRecheck: the provider's administrator denied this cluster; they may change
	// their mind.
	deniedRecheck = time.Minute
	// identityRecheck: a peered Identity comes back before its certificate expires even if
	// nothing changes, to show the expiry and a renewal that did not happen.
	identityRecheck = 10 * time.Minute
	// leaveRetry: leaving failed (the provider unreachable); deletion waits for it.
	leaveRetry = 10 * time.Second
	// slicesRecheck: a slice asked for has no answer yet.
	slicesRecheck = 2 * time.Second
)

// KubeconfigKey is the data key of the bootstrap Secret that holds the peering user's
// kubeconfig.
const KubeconfigKey = wire.KubeconfigField

// bootstrapChecks are the checks, in order, a bootstrap credential passes before anything
// is sent to the provider it names; the first failure decides.
func bootstrapChecks() []func(*input) *verdict {
	return []func(*input) *verdict{
		checkSecretPresent,
		checkKubeconfig,
		checkPeeringUser,
		checkIssuedForThisCluster,
		checkNotExpired,
		checkCAPin,
		checkNotConsumed,
	}
}

// firstFailure runs checks in order and returns the first verdict, nil when all pass.
func firstFailure(in *input, checks []func(*input) *verdict) *verdict {
	for _, check := range checks {
		if v := check(in); v != nil {
			return v
		}
	}
	return nil
}

func checkSecretPresent(in *input) *verdict {
	if in.secret != nil {
		return nil
	}
	return &verdict{state: authv1beta1.PeeringPending, reason: authv1beta1.ReasonBootstrapSecretMissing, requeue: secretRetry,
		message: fmt.Sprintf("Secret %s/%s not found: create it with the peering user's kubeconfig under data key %q (liqoctl generate peering prints it, from the kubeconfig of liqoctl generate peering-user on the provider)",
			in.peering.Namespace, in.peering.Spec.BootstrapSecretRef.Name, KubeconfigKey)}
}

func checkKubeconfig(in *input) *verdict {
	if in.kubeconfig != nil {
		return nil
	}
	reason := authv1beta1.ReasonBootstrapCredentialInvalid
	if authn.ReasonOf(in.kubeconfigErr) == authn.ReasonKubeconfigForeignCredentials {
		reason = authv1beta1.ReasonBootstrapCredentialRefused
	}
	return &verdict{state: authv1beta1.PeeringFailed, reason: reason,
		message: fmt.Sprintf("Secret %s/%s: %v: it must hold, under data key %q, the kubeconfig of a peering user (liqoctl generate peering-user on the provider), with the certificate and key embedded and nothing that runs or reads anything (no exec plugin, token or file)",
			in.peering.Namespace, in.peering.Spec.BootstrapSecretRef.Name, in.kubeconfigErr, KubeconfigKey)}
}

func checkPeeringUser(in *input) *verdict {
	if in.cert != nil && strings.HasPrefix(in.cert.Subject.CommonName, wire.PeeringUserPrefix) {
		return nil
	}
	user := "(unreadable)"
	if in.cert != nil {
		user = in.cert.Subject.CommonName
	}
	return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused,
		message: fmt.Sprintf("the bootstrap kubeconfig authenticates as %q, not as a peering user: a Peering uses only a single-use peering user (liqoctl generate peering-user on the provider), never an administrator's credential", user)}
}

func checkIssuedForThisCluster(in *input) *verdict {
	if consumer := wire.PeeringUserConsumer(in.cert.Subject.CommonName); consumer != in.clusterID {
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused,
			message: fmt.Sprintf("peering user %s was issued for cluster %q, not this cluster %q: ask the provider's administrator for one for this cluster (liqoctl generate peering-user --consumer-cluster-id %s)",
				in.cert.Subject.CommonName, consumer, in.clusterID, in.clusterID)}
	}
	return nil
}

func checkNotExpired(in *input) *verdict {
	if in.now.Before(in.cert.NotAfter) {
		return nil
	}
	return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapExpired,
		message: fmt.Sprintf("peering user %s expired at %s: ask the provider's administrator for a new one (liqoctl generate peering-user --consumer-cluster-id %s) and put its kubeconfig in Secret %s/%s",
			in.cert.Subject.CommonName, in.cert.NotAfter.UTC().Format(time.RFC3339), in.clusterID, in.peering.Namespace, in.peering.Spec.BootstrapSecretRef.Name)}
}

func checkCAPin(in *input) *verdict {
	pin := in.peering.Spec.ProviderCAFingerprint
	if pin == "" {
		return nil
	}
	fp, err := authn.CAFingerprint(in.kubeconfig.CA)
	if err == nil && fp == pin {
		return nil
	}
	if err != nil {
		fp = fmt.Sprintf("none readable (%v)", err)
	}
	return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonProviderCAMismatch,
		message: fmt.Sprintf("the bootstrap kubeconfig trusts CA %s, and spec.providerCAFingerprint pins %s: nothing was sent to that server; check with the provider's administrator which is right", fp, pin)}
}

func checkNotConsumed(in *input) *verdict {
	if in.consumedBy == nil {
		return nil
	}
	used := in.consumedBy.ConsumedBootstrap(in.cert.SerialNumber.Text(16))
	return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapConsumed,
		message: fmt.Sprintf("peering user %s (certificate %s) was used by this cluster to peer with %q already: a bootstrap credential is single use, re-applying it runs no handshake; for a new peering ask the provider's administrator for a new peering user (liqoctl generate peering-user --consumer-cluster-id %s)",
			used.User, used.Serial, in.consumedBy.RemoteID, in.clusterID)}
}

// peeredVerdict is the decision for a Peering whose record and Identity exist: peered
// when the Identity is ready with a certificate valid now, else why not.
func peeredVerdict(in *input) *verdict {
	id := in.identity
	ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
	cert := id.Status.Certificate
	switch {
	case ready == nil || ready.Status != "True":
		msg := "the Identity has no Ready condition yet"
		if ready != nil {
			msg = fmt.Sprintf("Identity %s/%s is not ready: %s: %s", id.Namespace, id.Name, ready.Reason, ready.Message)
		}
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonPeeringIdentityNotReady, message: msg, requeue: providerRetry}
	case cert == nil || cert.NotAfter == nil || !in.now.Before(cert.NotAfter.Time):
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonPeeringIdentityNotReady, requeue: providerRetry,
			message: fmt.Sprintf("the certificate of Identity %s/%s expired and was not renewed: the provider's administrator may have drained this cluster (liqoctl info on the provider says)", id.Namespace, id.Name)}
	}
	requeue := identityRecheck
	if left := cert.NotAfter.Sub(in.now); left < requeue {
		requeue = left
	}
	return &verdict{state: authv1beta1.PeeringPeered, reason: authv1beta1.ReasonPeered, requeue: requeue,
		message: fmt.Sprintf("Identity %s/%s is ready: certificate %s valid until %s", id.Namespace, id.Name, cert.SerialNumber, cert.NotAfter.UTC().Format(time.RFC3339))}
}
