package tenantstate

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// RenewOptions of liqoctl renew tenant.
type RenewOptions struct {
	Global      *cli.Global
	ClusterID   string
	Timeout     cli.Timeout
	Controllers cli.ControllersFlags
}

// NewRenewCmd returns the renew command group with its tenant subcommand.
func NewRenewCmd(g *cli.Global) *cobra.Command {
	o := &RenewOptions{Global: g}
	sub := &cobra.Command{
		Short: "Renew a consumer's control-plane certificate now (provider)",
		Long: `On the provider: issue the consumer a new control-plane certificate now, ahead of its
renewal time (before a planned outage, after a change of this cluster's CA or API server,
or to check that renewal works). It is no answer to a leak: the new certificate certifies
the same key, and whoever holds the old certificate and that key reads the new one from
the Tenant's status. After a leak of the consumer's key, remove the peering (liqoctl
drain tenant, then unauthenticate) until the key is replaced. The request is kept in this cluster's tenant
record, where the consumer cannot write; the provider's controllers (liqo-auth-manager, or
liqoctl's own for this command) renew it and publish it in the Tenant. The consumer's
manager picks it up; without one, liqoctl authenticate on the consumer does. The old
certificate stays valid until it expires: Kubernetes cannot revoke it.`,
		Example: "  liqoctl renew tenant cl-consumer",
	}
	o.Timeout.AddFlags(sub)
	o.Controllers.AddLocalFlag(sub)
	return tenantGroup(g, "renew", sub, &o.ClusterID, o.Run, o.Controllers.Validate)
}

// Run asks for the renewal in the tenant record and waits for the new certificate.
func (o *RenewOptions) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, tn, err := consumerNamespace(ctx, o.Global, o.ClusterID)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: tn, Name: o.ClusterID}
	t := &authv1beta1.Tenant{}
	if getErr := s.Client.Get(ctx, key, t); getErr != nil {
		return s.Explain(getErr, "reading the Tenant of "+o.ClusterID)
	}
	// Drained as the manager decides it: by the record and the spec, never the status,
	// which a status writer may set to anything (TestAttack10StatusWriterMakesRenewTenantSayDrained).
	rec, err := cluster.GetTenantRecord(ctx, s.Client, s.Namespace, o.ClusterID)
	if err != nil {
		return s.Explain(err, "reading the tenant record of "+o.ClusterID)
	}
	if cluster.StateInForce(rec, t.Spec.TenantCondition) == authv1beta1.TenantConditionDrained {
		return fmt.Errorf("Tenant %s/%s is Drained: it gets no certificate (liqoctl uncordon tenant %s first; a Drained spec.tenantCondition is its writer's to change)", tn, o.ClusterID, o.ClusterID) //nolint:staticcheck // ST1005: Tenant is the kind's name
	}
	// The certificate to replace, and whether it was, are read from the tenant record,
	// which only the administrator and the manager write, never from the Tenant's status:
	// a status writer would have the renewal asked for a serial nobody published, and this
	// command report a renewal that never happened.
	published := func() (*x509.Certificate, error) {
		rec, getTenantRecordErr := cluster.GetTenantRecord(ctx, s.Client, s.Namespace, o.ClusterID)
		if getTenantRecordErr != nil {
			return nil, s.Explain(getTenantRecordErr, "reading the tenant record of "+o.ClusterID)
		}
		cert, _, _ := rec.PublishedIn(string(t.UID))
		return cert, nil
	}
	cert, err := published()
	if err != nil {
		return err
	}
	if cert == nil {
		return fmt.Errorf("the provider published no certificate in Tenant %s/%s (its Ready condition says why: kubectl get tenant -n %s %s)", tn, o.ClusterID, tn, o.ClusterID)
	}
	old := cert.SerialNumber.Text(16)
	if applyControllersErr := cli.ApplyControllers(ctx, s, o.Controllers.Local); applyControllersErr != nil {
		return applyControllersErr
	}
	ctrls := authmanager.NewInProcess(o.Global)
	defer ctrls.Stop()
	if ensureErr := ctrls.Ensure(ctx, authmanager.SideRole{Side: s, Role: authmanager.Provider}); ensureErr != nil {
		return ensureErr
	}
	if updateTenantRecordErr := cluster.UpdateTenantRecord(ctx, s.Client, s.Client, s.Namespace, o.ClusterID, false, func(rec *cluster.TenantRecord) error {
		rec.RenewSerial = old
		return nil
	}); updateTenantRecordErr != nil {
		return s.Explain(updateTenantRecordErr, "recording the renewal request of "+o.ClusterID)
	}
	s.Report.Info("Renewal of certificate %s requested", old)
	if cert, err = o.waitIssued(ctx, s, t, published, old); err != nil {
		return err
	}
	s.Report.Info("Certificate %s issued, valid until %s, replacing %s", cert.SerialNumber.Text(16), cert.NotAfter.UTC().Format(time.RFC3339), old)
	s.Report.Info("The consumer's liqo-auth-manager picks it up; without one, liqoctl authenticate on the consumer does")
	s.Report.Warn("Certificate %s stays cryptographically valid until it expires: Kubernetes cannot revoke it", old)
	s.Report.Warn("Renewal certifies the same key: it does not answer a leak of that key (drain the tenant until the key is replaced)")
	return nil
}

// waitIssued waits until the tenant record publishes a certificate other than old, and
// the Tenant's status shows it. The manager records what it publishes before it writes
// the Tenant's status, where the consumer reads it: "issued" is said once the consumer
// can pick it up.
func (o *RenewOptions) waitIssued(ctx context.Context, s *handshake.Side, t *authv1beta1.Tenant, published func() (*x509.Certificate, error), old string) (*x509.Certificate, error) {
	var cert *x509.Certificate
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var pollUntilContextCancelErr error
		if cert, pollUntilContextCancelErr = published(); pollUntilContextCancelErr != nil || cert == nil || cert.SerialNumber.Text(16) == old {
			return false, pollUntilContextCancelErr
		}
		if getErr := s.Client.Get(ctx, client.ObjectKeyFromObject(t), t); getErr != nil {
			return false, getErr
		}
		return t.Status.Certificate != nil && t.Status.Certificate.SerialNumber == cert.SerialNumber.Text(16), nil
	})
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, fmt.Errorf("interrupted while waiting for the new certificate of %q (the renewal stays requested): %w", o.ClusterID, context.Canceled)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("timed out waiting for the new certificate of %q: %s runs the provider's controllers; the Tenant's CertificateIssued condition says what they wait for", o.ClusterID, s.Controllers())
	}
	if err != nil {
		return nil, s.Explain(err, "waiting for the new certificate")
	}
	return cert, nil
}
