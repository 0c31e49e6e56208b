package handshake

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// liqoWarning is the last Warning Event Liqo's controllers recorded on a Tenant: they
// write no status conditions, so a handshake they will not complete is said only there.
func liqoWarning(ctx context.Context, s *Side, key client.ObjectKey) (reason, message string) {
	var events corev1.EventList
	if err := s.Client.List(ctx, &events, client.InNamespace(key.Namespace)); err != nil {
		return "", "" // credentials that may not read Events (a peering user): nothing to add
	}
	var last *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != "Tenant" || e.InvolvedObject.Name != key.Name {
			continue
		}
		if last == nil || eventTime(e).After(eventTime(last)) {
			last = e
		}
	}
	if last == nil {
		return "", ""
	}
	return last.Reason, last.Message
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// LiqoRemedy says what to do about a Warning Event of Liqo's tenant controller on the
// Tenant of consumerID in namespace ns: what Liqo keeps that blocks a new handshake, and
// the command that removes it ("" when the reason is not one of those).
func LiqoRemedy(reason, message, ns, consumerID string) string {
	nonces := fmt.Sprintf("kubectl get secrets -A -l %s=%s,%s", wire.RemoteClusterIDLabel, consumerID, wire.NonceLabel)
	switch {
	case reason == "SignatureVerificationFailed":
		return fmt.Sprintf("Liqo verifies the signature against the nonce Secret it finds for cluster %s in any namespace, and only once per change of the Tenant: with a stale one elsewhere (%s), delete it, then delete the Tenant (kubectl delete tenant -n %s %s) and re-run", consumerID, nonces, ns, consumerID)
	case reason == "NonceNotFound":
		return fmt.Sprintf("Liqo wants exactly one nonce Secret for cluster %s across namespaces: %s lists them; keep only the one in %s and re-run", consumerID, nonces, ns)
	case reason == "AuthParamsFailed" && strings.Contains(message, "does not match"):
		return fmt.Sprintf("Liqo keeps the certificate it issued, bound to the first CSR, in Secret %s of %s: remove it (kubectl delete secret -n %s %s) and re-run", wire.LiqoRemoteCertificateSecret, ns, ns, wire.LiqoRemoteCertificateSecret)
	case reason == "TenantNamespaceCreationFailed":
		return fmt.Sprintf("Liqo wants exactly one namespace labelled for cluster %s: kubectl get namespaces -l %s=%s lists them; delete those that are not %s (or wait until a terminating one is gone) and re-run", consumerID, wire.RemoteClusterIDLabel, consumerID, ns)
	}
	return ""
}

// explainLiqoWait adds to a Liqo wait that timed out what Liqo's controllers said.
func explainLiqoWait(s *Side, key client.ObjectKey, consumerID string, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reason, message := liqoWarning(ctx, s, key)
	if reason == "" {
		return err
	}
	out := fmt.Errorf("%w\nLiqo's controllers said, on the Tenant: %s: %s", err, reason, message)
	if r := LiqoRemedy(reason, message, key.Namespace, consumerID); r != "" {
		out = fmt.Errorf("%w\n%s", out, r)
	}
	return out
}
