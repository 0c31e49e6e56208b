package tenantstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// maxDenialReason is the longest reason of a denial: one line the consumer reads.
const maxDenialReason = 256

// ApprovalOptions of liqoctl approve|deny tenant.
type ApprovalOptions struct {
	Global    *cli.Global
	ClusterID string
	// Decision is cluster.Approved or cluster.Denied.
	Decision string
	// Reason is the administrator's reason, which the consumer sees (required to deny).
	Reason  string
	Timeout cli.Timeout
	// Controllers is --local-controllers: whose controllers handle the tenant here.
	Controllers cli.ControllersFlags
}

// NewApprovalCmds returns the approve and deny command groups, each with its tenant
// subcommand.
func NewApprovalCmds(g *cli.Global) []*cobra.Command {
	approve := &ApprovalOptions{Global: g, Decision: cluster.Approved}
	approveCmd := &cobra.Command{
		Short: "Approve the key of a consumer's handshake (provider)",
		Long: `On the provider: approve the key a consumer's Tenant presents, once this provider verified
its handshake, so that it gets its certificate and its access. Needed when this cluster
requires the approval of new consumers (liqoctl install --require-approval); the consumer's
liqoctl authenticate waits for it. The decision is kept in this cluster's tenant record,
where no tenant writes, for that key only: a Tenant presenting another key later waits
again. An approval replaces an earlier denial. liqoctl info lists the consumers that wait.`,
		Example: "  liqoctl approve tenant cl-consumer",
	}
	deny := &ApprovalOptions{Global: g, Decision: cluster.Denied}
	denyCmd := &cobra.Command{
		Short: "Deny the key of a consumer's handshake (provider)",
		Long: `On the provider: deny the key a consumer's Tenant presents. It gets no certificate and no
access, whether approval is required or not, and its liqoctl authenticate ends with the
reason given here. The Tenant stays, visible in kubectl get tenants and liqoctl info; a
Tenant presenting another key later waits for a decision again, and liqoctl approve tenant
takes the denial back. A consumer that already holds a certificate is drained first
(liqoctl drain tenant): Kubernetes cannot revoke its certificate, a drain removes what it
grants and proves it.`,
		Example: `  liqoctl deny tenant cl-consumer --reason "not a customer of this cluster"`,
	}
	denyCmd.Flags().StringVar(&deny.Reason, "reason", "", "why, in one line the consumer reads (required)")
	var out []*cobra.Command
	for _, c := range []struct {
		verb string
		o    *ApprovalOptions
		cmd  *cobra.Command
	}{{"approve", approve, approveCmd}, {"deny", deny, denyCmd}} {
		c.o.Timeout.AddFlags(c.cmd)
		c.o.Controllers.AddLocalFlag(c.cmd)
		out = append(out, tenantGroup(g, c.verb, c.cmd, &c.o.ClusterID, c.o.Run, c.o.Controllers.Validate, c.o.Validate))
	}
	return out
}

// Validate checks the reason: a denial has one, on one line, short, and nothing a terminal
// would obey.
func (o *ApprovalOptions) Validate() error {
	if o.Decision != cluster.Denied {
		return nil
	}
	switch {
	case o.Reason == "":
		return errors.New("--reason is required: the consumer reads it")
	case len(o.Reason) > maxDenialReason:
		return fmt.Errorf("--reason is %d bytes long: at most %d", len(o.Reason), maxDenialReason)
	case authv1beta1.UnsafeTextIndex(o.Reason) >= 0:
		return errors.New("--reason holds a control or formatting character: one line of text")
	}
	return nil
}

// Run records the decision about the key the consumer's Tenant presents, as this provider
// sealed it, and waits until the provider's controllers applied it.
func (o *ApprovalOptions) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, tn, err := consumerNamespace(ctx, o.Global, o.ClusterID)
	if err != nil {
		return err
	}
	if s.Controllers().Liqo() {
		return s.Errorf("%s handle the Tenants here: they approve every consumer that authenticates, and know no approval", s.Controllers())
	}
	key := client.ObjectKey{Namespace: tn, Name: o.ClusterID}
	fp, t, err := o.sealedKey(ctx, s, key)
	if err != nil {
		return err
	}
	if o.Decision == cluster.Denied {
		if holdsErr := o.checkNotHolding(ctx, s); holdsErr != nil {
			return holdsErr
		}
	}
	if applyErr := cli.ApplyControllers(ctx, s, o.Controllers.Local); applyErr != nil {
		return applyErr
	}
	ctrls := authmanager.NewInProcess(o.Global)
	defer ctrls.Stop()
	if ensureErr := ctrls.Ensure(ctx, authmanager.SideRole{Side: s, Role: authmanager.Provider}); ensureErr != nil {
		return ensureErr
	}
	decision := &cluster.Approval{Decision: o.Decision, KeyFingerprint: fp, Reason: o.Reason, At: o.Global.Clock().UTC().Truncate(time.Second)}
	if recordErr := cluster.UpdateTenantRecord(ctx, s.Client, s.Client, s.Namespace, o.ClusterID, false, func(rec *cluster.TenantRecord) error {
		rec.Approval = decision
		return nil
	}); recordErr != nil {
		return s.Explain(recordErr, "recording the decision about "+o.ClusterID)
	}
	s.Report.Info("Key %s of cluster %s %s (Tenant %s/%s)", fp, o.ClusterID, strings.ToLower(o.Decision), tn, t.Name)
	if t, err = handshake.WaitDecisionApplied(ctx, s, key, fp, o.Decision); err != nil {
		return fmt.Errorf("%w (the decision is recorded: %s applies it when it runs)", err, s.Controllers())
	}
	o.report(s, t)
	return nil
}

// sealedKey reads the consumer's Tenant and the key this provider sealed its handshake
// for: the one the administrator decides about.
func (o *ApprovalOptions) sealedKey(ctx context.Context, s *handshake.Side, key client.ObjectKey) (string, *authv1beta1.Tenant, error) {
	t := &authv1beta1.Tenant{}
	if err := s.Client.Get(ctx, key, t); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil, s.Errorf("cluster %s has no Tenant here yet: a decision is about the key its handshake presents; run this once it started (liqoctl info lists the consumers that wait)", o.ClusterID)
		}
		return "", nil, s.Explain(err, "reading the Tenant of "+o.ClusterID)
	}
	clusterKey, err := s.ClusterKey(ctx)
	if err != nil {
		return "", nil, err
	}
	fp, err := handshake.SealedKey(t, clusterKey.Public())
	if err != nil {
		return "", nil, s.Errorf("Tenant %s/%s presents no handshake this provider accepted (%v): only a verified key is approved or denied; its Authenticated condition says why (kubectl describe tenant -n %s %s)",
			key.Namespace, key.Name, err, key.Namespace, key.Name)
	}
	return fp, t, nil
}

// checkNotHolding refuses to deny a consumer that holds a control-plane certificate still
// valid and is not Drained: a denial issues nothing more, it takes nothing back;
// a drain does (and proves it).
func (o *ApprovalOptions) checkNotHolding(ctx context.Context, s *handshake.Side) error {
	rec, err := cluster.GetTenantRecord(ctx, s.Client, s.Namespace, o.ClusterID)
	if err != nil {
		return s.Explain(err, "reading the tenant record of "+o.ClusterID)
	}
	if rec == nil || rec.State == string(authv1beta1.TenantConditionDrained) {
		return nil
	}
	for _, c := range rec.Valid(o.Global.Clock()) {
		if c.Slice == "" {
			return s.Errorf("cluster %s holds certificate %s of this provider, valid until %s: a denial would not take it back; drain it first (liqoctl drain tenant %s), then deny",
				o.ClusterID, c.Serial, c.NotAfter.UTC().Format(time.RFC3339), o.ClusterID)
		}
	}
	return nil
}

// report says what the provider's controllers made of the decision.
func (o *ApprovalOptions) report(s *handshake.Side, t *authv1beta1.Tenant) {
	if o.Decision == cluster.Denied {
		s.Report.Info("No certificate and no access for this key; the consumer reads: %s", o.Reason)
		return
	}
	switch c := meta.FindStatusCondition(t.Status.Conditions, authv1beta1.ConditionCertificateIssued); {
	case c != nil && c.Status == metav1.ConditionTrue && t.Status.Certificate != nil:
		s.Report.Info("Certificate %s issued, valid until %s: the consumer's liqoctl authenticate completes", t.Status.Certificate.SerialNumber, t.Status.Certificate.NotAfter.UTC().Format(time.RFC3339))
	case c != nil:
		s.Report.Warn("No certificate yet (%s): %s", c.Reason, c.Message)
	}
}
