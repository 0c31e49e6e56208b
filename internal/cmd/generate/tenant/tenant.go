// Package tenant is liqoctl generate tenant: the consumer signs the provider's nonce and
// prints the Tenant to apply on the provider.
package tenant

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl generate tenant.
type Options struct {
	Global                *cli.Global
	RemoteClusterID       string
	Nonce                 string
	RemoteTenantNamespace string
	ProxyURL              string
	ExpectFingerprint     string
	Output                cli.OutputFlags
	Timeout               cli.Timeout
}

// NewCmd returns the generate tenant command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "tenant",
		Aliases: []string{"tenants"},
		Short:   "Sign the provider's nonce and print the Tenant to apply on the provider (consumer)",
		Long: `On the consumer: sign the provider's nonce with this cluster's key and print a Tenant
(public key, CSR, signature) for the provider's administrator to kubectl apply.
The fingerprint of the key it hands over is printed on stderr. With --expect-fingerprint,
the provider CA fingerprint its administrator gave you is pinned: an Identity presenting
another CA is then refused.`,
		Example: `  liqoctl generate tenant --remote-cluster-id cl-provider --nonce $(cat nonce.txt) > tenant.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	cli.AddRemoteClusterIDFlag(cmd, g, &o.RemoteClusterID, "provider")
	f.StringVar(&o.Nonce, "nonce", "", "the nonce printed by liqoctl get nonce on the provider")
	f.StringVar(&o.RemoteTenantNamespace, "remote-tenant-namespace", "", "tenant namespace of this cluster on the provider (default liqo-tenant-<this cluster ID>)")
	f.StringVar(&o.ProxyURL, "tenant-proxy-url", "", "proxy this cluster uses to reach the provider, carried by the Tenant (not --proxy-url: that is the proxy liqoctl reaches this cluster through)")
	f.StringVar(&o.ExpectFingerprint, "expect-fingerprint", "", "fingerprint of the provider CA (sha256:...) to pin")
	_ = cmd.MarkFlagRequired("nonce")
	o.Output.AddFlags(cmd, "yaml")
	o.Timeout.AddFlags(cmd)
	o.Global.AddAdoptFlag(cmd)
	return cmd
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := cli.ValidateRemoteClusterID(o.RemoteClusterID); err != nil {
		return err
	}
	if err := authn.CheckNonce(o.Nonce); err != nil {
		return fmt.Errorf("--nonce: %w: pass it exactly as liqoctl get nonce prints it", err)
	}
	if o.ExpectFingerprint != "" {
		if err := authn.ValidateFingerprint(o.ExpectFingerprint); err != nil {
			return fmt.Errorf("--expect-fingerprint: %w", err)
		}
	}
	if err := authn.ValidateProxyURL(o.ProxyURL); err != nil {
		return fmt.Errorf("--tenant-proxy-url: %w", err)
	}
	if o.RemoteTenantNamespace != "" {
		if errs := validation.IsDNS1123Label(o.RemoteTenantNamespace); len(errs) > 0 {
			return fmt.Errorf("--remote-tenant-namespace %q is not a namespace name: %s; pass it as liqoctl create nonce prints it on the provider", o.RemoteTenantNamespace, errs[0])
		}
	}
	return o.Output.Validate()
}

// Run signs the nonce and prints the Tenant.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, tn, err := o.Global.LocalTenantNamespace(ctx, o.RemoteClusterID, "provider")
	if err != nil {
		return err
	}
	// Checked before anything is pinned: a refused run changes nothing.
	remoteTN := o.RemoteTenantNamespace
	if remoteTN == "" {
		remoteTN = wire.TenantNamespaceName(s.ClusterID)
	}
	if checkErr := checkIdentityNamespace(ctx, s, tn, o.RemoteClusterID, remoteTN, o.RemoteTenantNamespace != ""); checkErr != nil {
		return checkErr
	}
	if o.ExpectFingerprint == "" {
		if warnErr := o.warnUnpinnedCA(ctx, s); warnErr != nil {
			return warnErr
		}
	}
	// This cluster's way to the provider is its own choice: the Identity the provider's
	// administrator hands back is refused with any other (whoever may write the Tenant
	// there may change its proxy meanwhile). So is its tenant namespace there: where its
	// slices' copies are, whatever an Identity writer names later. All in one write, after
	// every check: a run refused for one pins none of the others.
	// A tenant namespace the provider's administrator gives replaces the manager's guess.
	if pinErr := handshake.PinProxy(ctx, s, o.RemoteClusterID, o.ExpectFingerprint, "--expect-fingerprint gives "+o.ExpectFingerprint, o.ProxyURL, remoteTN, o.RemoteTenantNamespace != ""); pinErr != nil {
		return pinErr
	}
	if o.ExpectFingerprint != "" {
		s.Report.Info("Provider CA %s pinned", o.ExpectFingerprint)
	}
	s.Report.Info("Pinned %s to reach provider %q", cluster.DescribeProxy(o.ProxyURL), o.RemoteClusterID)
	ctrls := authmanager.NewInProcess(o.Global)
	defer ctrls.Stop()
	if ensureErr := ctrls.Ensure(ctx, authmanager.SideRole{Side: s, Role: authmanager.Consumer}); ensureErr != nil {
		return ensureErr
	}
	if ensureSignedNonceErr := handshake.EnsureSignedNonce(ctx, s, tn, o.RemoteClusterID, o.Nonce, nil); ensureSignedNonceErr != nil {
		return ensureSignedNonceErr
	}
	sig, err := handshake.WaitSignedNonce(ctx, s, tn, o.Nonce)
	if err != nil {
		return err
	}
	s.Report.Info("Nonce is signed")
	key, err := s.ClusterKey(ctx)
	if err != nil {
		return err
	}
	t, err := handshake.ForgeTenant(s.ClusterID, key, sig, remoteTN, o.ProxyURL)
	if err != nil {
		return err
	}
	fp, err := authn.Fingerprint(key.Public())
	if err != nil {
		return err
	}
	s.Report.Info("Tenant correctly generated: it hands over public key %s", fp)
	s.Report.Info("Next, on the provider: kubectl apply -f tenant.yaml; liqoctl generate identity --remote-cluster-id %s --expect-fingerprint %s", s.ClusterID, fp)
	return o.Output.PrintObjects(o.Global.Streams.Out, t)
}

// warnUnpinnedCA says, when no --expect-fingerprint was given, which provider CA the
// Identity must present: the one pinned earlier, or, with none, the CA of
// the first Identity this cluster's manager accepts for the provider, whoever applies it.
func (o *Options) warnUnpinnedCA(ctx context.Context, s *handshake.Side) error {
	rec, err := cluster.GetTenantRecord(ctx, s.Client, s.Namespace, o.RemoteClusterID)
	if err != nil {
		return s.Explain(err, "reading the provider CA pinned")
	}
	if rec != nil && rec.CAFingerprint != "" {
		s.Report.Info("Provider CA %s stays pinned: the Identity must present it", rec.CAFingerprint)
		return nil
	}
	s.Report.Warn("No provider CA is pinned: the first Identity accepted for %q, whoever applies it, pins its CA. Pass --expect-fingerprint with the fingerprint liqoctl create nonce printed on the provider (liqoctl info there shows it too) to pin it now", o.RemoteClusterID)
	return nil
}

// checkIdentityNamespace refuses to pin remoteTN as this cluster's tenant namespace on
// provider providerID where no handshake pinned one yet and this cluster holds a peering
// with it older than the pin: the pin would send its slices' copies, and their removal and
// its proof, where they are not (helper-44's F1). An Identity's spec.namespace is its
// writers' and says nothing either way (helper-46's F1: one had the control-plane Identity
// refused for a moment, helper-47's F2: one moved them all to the default). So with
// remoteTN the default (explicit false), any Identity or ResourceSlice of the provider here
// refuses it: the provider's administrator's word is needed (--remote-tenant-namespace, as
// liqoctl create nonce prints it), or liqoctl authenticate, which reads it from the
// provider. With remoteTN given, an accepted control-plane Identity that names another
// still refuses it. The advice names no command built from an Identity's namespace
// (helper-45's F1). A namespace the manager pinned as its guess (PinnedByManager) is held
// against the default, and given way to by remoteTN given, the provider administrator's
// word, with no Identity's say.
func checkIdentityNamespace(ctx context.Context, s *handshake.Side, tn, providerID, remoteTN string, explicit bool) error {
	rec, err := cluster.GetTenantRecord(ctx, s.Client, s.Namespace, providerID)
	if err != nil {
		return s.Explain(err, "reading the tenant record")
	}
	switch {
	case rec != nil && rec.ProviderTenantNamespace != "" && rec.PinnedByManager && explicit:
		// The administrator's word replaces the manager's guess. No Identity says
		// otherwise: the identity controller accepts only those that name the guess,
		// whoever moved them there (helper-50's F1: an Identity writer's move refused the
		// provider's word).
		return nil
	case rec != nil && rec.ProviderTenantNamespace != "":
		return rec.CheckProviderNamespace(remoteTN)
	}
	var ids authv1beta1.IdentityList
	if err := s.Client.List(ctx, &ids, client.InNamespace(tn)); err != nil {
		return s.Explain(err, "reading this cluster's Identities of the provider")
	}
	if !explicit {
		return refuseDefaultWhenHeld(ctx, s, tn, providerID, len(ids.Items) > 0)
	}
	for i := range ids.Items {
		id := &ids.Items[i]
		named := ptr.Deref(id.Spec.Namespace, "")
		if id.Name == wire.IdentityName(providerID) && named != "" && named != remoteTN && meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady) {
			return fmt.Errorf("this cluster's Identity of provider %q, accepted before a handshake pinned a tenant namespace, names another tenant namespace there than %q (whoever may write Identities may have moved it): confirm with the provider's administrator which namespace the provider keeps for this cluster (liqoctl create nonce prints the --remote-tenant-namespace to pass), or run liqoctl unauthenticate --remote-cluster-id %s first",
				providerID, remoteTN, providerID)
		}
	}
	return nil
}

// refuseDefaultWhenHeld refuses the default tenant namespace, with no pin and no
// --remote-tenant-namespace, when this cluster holds Identities (held) or ResourceSlices of
// the provider in tn: a peering older than the pin, whose namespace is the provider's word.
func refuseDefaultWhenHeld(ctx context.Context, s *handshake.Side, tn, providerID string, held bool) error {
	if !held {
		var rss authv1beta1.ResourceSliceList
		if err := s.Client.List(ctx, &rss, client.InNamespace(tn), client.Limit(1)); err != nil {
			return s.Explain(err, "reading this cluster's ResourceSlices of the provider")
		}
		held = len(rss.Items) > 0
	}
	if held {
		return fmt.Errorf("this cluster holds Identities or ResourceSlices of provider %q in %s from an earlier handshake, and no tenant namespace there is pinned (a peering older than the pin, or one whose pins were forgotten): which one the provider keeps for this cluster is the provider's word, not theirs (whoever may write Identities may have moved them): pass --remote-tenant-namespace as the provider's administrator gives it (liqoctl create nonce prints it), or run liqoctl authenticate with both kubeconfigs, which reads it from the provider",
			providerID, tn)
	}
	return nil
}
