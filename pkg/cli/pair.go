package cli

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// NewPair connects to the local cluster (consumer) and the remote one (provider).
func NewPair(g *Global, remote *ClusterFlags) (*handshake.Pair, error) {
	c, err := g.Local.Side("local", g.Printer().Scoped("local"))
	if err != nil {
		return nil, err
	}
	remote.policy = g.PluginPolicy
	p, err := remote.Side("remote", g.Printer().Scoped("remote"))
	if err != nil {
		return nil, err
	}
	c.AdoptTenantNamespace, p.AdoptTenantNamespace = g.AdoptTenantNamespace, g.AdoptTenantNamespace
	return &handshake.Pair{Consumer: c, Provider: p}, nil
}

// IdentifyPair reads both cluster IDs, and what tells the clusters apart, in parallel,
// and refuses a pair that is one cluster.
func IdentifyPair(ctx context.Context, p *handshake.Pair) error {
	var eg errgroup.Group
	eg.Go(func() error { return p.Consumer.Identify(ctx) })
	eg.Go(func() error { return p.Provider.Identify(ctx) })
	// Read now, with the IDs; CheckDistinct weighs a failure to read them.
	eg.Go(func() error { _, _ = p.Consumer.SystemUID(ctx); return nil })
	eg.Go(func() error { _, _ = p.Provider.SystemUID(ctx); return nil })
	if err := eg.Wait(); err != nil {
		return err
	}
	return handshake.CheckDistinct(ctx, p.Consumer, p.Provider)
}

// PrintAuthenticatePlan prints what authenticate would create on each cluster and the
// permissions the consumer would get, without changing anything.
func PrintAuthenticatePlan(ctx context.Context, g *Global, p *handshake.Pair, st *handshake.State) error {
	c, pr := p.Consumer, p.Provider
	if st.Complete {
		c.Report.Info("Already authenticated with cluster %q: nothing would change", pr.ClusterID)
		return nil
	}
	cTN, pTN := wire.TenantNamespaceName(pr.ClusterID), wire.TenantNamespaceName(c.ClusterID)
	c.Report.Info("Would ensure tenant namespace %s", cTN)
	pr.Report.Info("Would ensure tenant namespace %s", pTN)
	if !st.TenantAccepted {
		pr.Report.Info("Would create Secret %s/%s with a fresh nonce", pTN, wire.NonceSecretName)
		c.Report.Info("Would create Secret %s/%s and sign the nonce with this cluster's key", cTN, wire.SignedNonceSecretName)
		pr.Report.Info("Would apply Tenant %s/%s with a CSR for user %q in group %q", pTN, c.ClusterID, c.ClusterID, wire.UserGroup)
		pr.Report.Info("Would have the CSR signed by the client signer of %s", pr.Config.Host)
	}
	pr.Report.Info("Would bind ClusterRole %s and Role %s in namespace %s", wire.ControlPlaneRoleName, wire.TenantReaderName, pTN)
	c.Report.Info("Would apply Identity %s/%s and write Secret %s/%s with the kubeconfig", cTN, wire.IdentityName(pr.ClusterID),
		cTN, wire.KubeconfigSecretName(wire.IdentityName(pr.ClusterID)))
	fmt.Fprintf(g.Streams.Out, "Permissions of user %q on cluster %q, in namespace %q only:\n", c.ClusterID, pr.ClusterID, pTN)
	fmt.Fprint(g.Streams.Out, FormatRules(access.TenantRules(c.ClusterID)))
	return nil
}

// FormatRules renders RBAC rules as an indented list, one rule per line.
func FormatRules(rules []rbacv1.PolicyRule) string {
	var b strings.Builder
	for _, r := range rules {
		groups := make([]string, len(r.APIGroups))
		for i, g := range r.APIGroups {
			if g == "" {
				g = "core"
			}
			groups[i] = g
		}
		fmt.Fprintf(&b, "  %-45s %s", strings.Join(groups, ",")+"/"+strings.Join(r.Resources, ","), strings.Join(r.Verbs, ","))
		if len(r.ResourceNames) > 0 {
			fmt.Fprintf(&b, " (only %s)", strings.Join(r.ResourceNames, ","))
		}
		b.WriteString("\n")
	}
	return b.String()
}
