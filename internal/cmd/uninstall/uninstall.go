// Package uninstall is liqoctl uninstall: remove what liqoctl install created.
package uninstall

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/installer"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl uninstall.
type Options struct {
	Global       *cli.Global
	Force        bool
	KeepIdentity bool
	// SkipConfirm goes ahead without asking.
	SkipConfirm bool
	Timeout     cli.Timeout
}

// NewCmd returns the uninstall command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what liqoctl install created from the local cluster",
		Long: `Remove the CRDs, the ClusterRoles, the manager, the configuration and, unless
--keep-identity, the cluster ID and key pair (a later install makes a new identity that
peers must authenticate again). It refuses while Tenants, Identities, ResourceSlices or
Renews exist, since their peers would lose access without notice: unauthenticate them
first, or pass --force.

Nothing another installation manages is removed: CRDs, ClusterRoles, the namespace, the
cluster ID and keys that Liqo's Helm chart (or any other field manager) owns are kept, and
so are a CRD that objects liqo-auth did not make still use, and a ClusterRole that
bindings liqo-auth did not make still refer to. --force never deletes those objects.

Unless --keep-identity, the tenant namespaces liqo-auth made (those its tenant records
name) go too: the records go with the Liqo namespace, and a later install would refuse
namespaces it has no record of. A tenant namespace holding another installation's objects
is kept. With --keep-identity, records and tenant namespaces stay, for a re-install.

It says what it will remove and asks before it does; --skip-confirm does not ask, and is
needed when stdin is not a terminal.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "uninstall even while Tenants, Identities, ResourceSlices or Renews exist (those of liqo-auth's tenant namespaces are deleted, others kept)")
	cmd.Flags().BoolVar(&o.KeepIdentity, "keep-identity", false, "keep the cluster ID and key pair, the tenant records and the tenant namespaces")
	cmd.Flags().BoolVar(&o.SkipConfirm, "skip-confirm", false, "do not ask for confirmation (needed when stdin is not a terminal)")
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Run uninstalls: it checks what would block it, says what it will remove and asks, then
// removes.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	p := o.Global.Printer()
	s, err := o.Global.Local.Side("", p)
	if err != nil {
		return err
	}
	_ = s.Identify(ctx) // only to name the cluster in the question: a half-removed one has no ID
	peers, err := o.checkPeers(ctx, s)
	if err != nil {
		return err
	}
	users, err := o.checkPeeringUsers(ctx, s)
	if err != nil {
		return err
	}
	var tenantNS []string
	if !o.KeepIdentity {
		if tenantNS, err = tenantNamespaces(ctx, s, peers); err != nil {
			return err
		}
	}
	if err := o.Global.Confirm(o.SkipConfirm, o.question(s, peers, users, tenantNS)); err != nil {
		return err
	}
	if err := o.removePeers(ctx, s, peers); err != nil {
		return err
	}
	if err := removePeeringUsers(ctx, s, users); err != nil {
		return err
	}
	if err := o.removeInstalled(ctx, s, peers); err != nil {
		return err
	}
	if o.KeepIdentity {
		p.Info("Cluster ID, key, tenant records and tenant namespaces kept in namespace %q", s.Namespace)
		return nil
	}
	return removeIdentity(ctx, s, p, tenantNS)
}

// removeIdentity deletes the tenant namespaces, then the Liqo namespace when liqo-auth
// created it (with the cluster ID and key).
func removeIdentity(ctx context.Context, s *handshake.Side, p *cli.Printer, tenantNS []string) error {
	for _, ns := range tenantNS {
		if err := s.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
			return s.Explain(err, "deleting tenant namespace "+ns)
		}
		p.Info("Tenant namespace %q deleted", ns)
	}
	var n corev1.Namespace
	if err := s.Client.Get(ctx, client.ObjectKey{Name: s.Namespace}, &n); err == nil && n.Labels[wire.ManagedByLabel] == wire.ManagedByValue {
		if err := s.Client.Delete(ctx, &n); client.IgnoreNotFound(err) != nil {
			return err
		}
		p.Info("Namespace %q deleted", s.Namespace)
	}
	p.Info("Cluster ID and key removed")
	return nil
}

// question says what uninstall is about to remove.
func (o *Options) question(s *handshake.Side, peers []installer.PeerObject, users []handshake.PeeringUser, tenantNS []string) string {
	var b strings.Builder
	who := "at " + s.Config.Host
	if s.ClusterID != "" {
		who = fmt.Sprintf("%q (%s)", s.ClusterID, s.Config.Host)
	}
	fmt.Fprintf(&b, "liqoctl uninstall removes liqo-auth from cluster %s: its CRDs, ClusterRoles, manager and configuration", who)
	if o.KeepIdentity {
		b.WriteString(", keeping its cluster ID, key, tenant records and tenant namespaces")
	} else {
		b.WriteString(", and its cluster ID and key: every peer must authenticate again with the new identity a later install makes")
	}
	var ours []string
	for _, p := range peers {
		if p.Ours {
			ours = append(ours, p.String())
		}
	}
	if len(ours) > 0 {
		fmt.Fprintf(&b, ".\nIt deletes, without telling their peers: %s", strings.Join(ours, ", "))
	}
	if len(users) > 0 {
		fmt.Fprintf(&b, ".\nIt deletes %d peering users", len(users))
	}
	if len(tenantNS) > 0 {
		fmt.Fprintf(&b, ".\nIt deletes the tenant namespaces it made: %s", strings.Join(tenantNS, ", "))
	}
	b.WriteString(".")
	return b.String()
}

// tenantNamespaces are the tenant namespaces this cluster's records name (liqo-auth made
// or adopted them), still the same namespace (UID), and holding no object of another
// installation.
func tenantNamespaces(ctx context.Context, s *handshake.Side, peers []installer.PeerObject) ([]string, error) {
	recs, err := cluster.ListTenantRecords(ctx, s.Client, s.Namespace)
	if err != nil {
		return nil, s.Explain(err, "reading the tenant records")
	}
	foreign := map[string]bool{}
	for _, p := range peers {
		if !p.Ours {
			foreign[p.Object.GetNamespace()] = true
		}
	}
	var out []string
	for _, r := range recs {
		if r.Namespace == "" || foreign[r.Namespace] {
			continue
		}
		var ns corev1.Namespace
		if err := s.Client.Get(ctx, client.ObjectKey{Name: r.Namespace}, &ns); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, s.Explain(err, "reading tenant namespace "+r.Namespace)
		}
		if r.NamespaceUID != "" && ns.UID != r.NamespaceUID {
			continue
		}
		out = append(out, r.Namespace)
	}
	return out, nil
}

// removeInstalled deletes what install created, keeping what another installation uses.
func (o *Options) removeInstalled(ctx context.Context, s *handshake.Side, peers []installer.PeerObject) error {
	p := o.Global.Printer()
	ns := s.Namespace
	var objs []client.Object
	objs = append(objs, installer.ForgeManagerObjects(ns, "", nil)...)
	installed, err := installer.InstallObjects(installer.InstallOptions{Namespace: ns})
	if err != nil {
		return err
	}
	for _, obj := range installed {
		if _, isNS := obj.(*corev1.Namespace); !isNS {
			objs = append(objs, obj)
		}
	}
	objs = append(objs, cluster.ForgeConfigMap(ns, cluster.Config{}))
	if !o.KeepIdentity {
		objs = append(objs,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.ClusterIDConfigMapName}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.KeysSecretName}})
	}
	var kept []*installer.Kept
	for _, obj := range objs {
		k, err := installer.KeepOnUninstall(ctx, s.Client, obj, peers)
		if err != nil {
			return s.Explain(err, "checking who else uses "+obj.GetName())
		}
		if k != nil {
			kept = append(kept, k)
			continue
		}
		if err := s.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return fmt.Errorf("deleting %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	for _, k := range kept {
		p.Warn("Kept %s", k)
	}
	if len(kept) == 0 {
		p.Info("CRDs, ClusterRoles, manager and configuration removed")
	} else {
		p.Info("What liqo-auth alone used is removed; %d objects another installation uses are kept", len(kept))
	}
	return nil
}

// checkPeeringUsers refuses while peering users exist: their grants would outlive the
// admission policy that keeps them to the nonce, which uninstall removes. With --force it
// returns them, to be deleted.
func (o *Options) checkPeeringUsers(ctx context.Context, s *handshake.Side) ([]handshake.PeeringUser, error) {
	users, err := handshake.ListPeeringUserGrants(ctx, s)
	if err != nil || len(users) == 0 {
		return nil, err
	}
	if !o.Force {
		var names []string
		for _, u := range users {
			names = append(names, fmt.Sprintf("%s (consumer %s)", u.User, u.ConsumerID))
		}
		return nil, fmt.Errorf("peering users exist: %s; their grants would outlive the admission policy that keeps them to the nonce: run liqoctl delete peering-user --consumer-cluster-id ID for each, or pass --force to delete them", strings.Join(names, ", "))
	}
	return users, nil
}

// removePeeringUsers deletes the peering users, each with its proof.
func removePeeringUsers(ctx context.Context, s *handshake.Side, users []handshake.PeeringUser) error {
	done := map[string]bool{}
	for _, u := range users {
		if done[u.ConsumerID] {
			continue
		}
		done[u.ConsumerID] = true
		if _, err := handshake.DeletePeeringUser(ctx, s, u.ConsumerID); err != nil {
			return err
		}
	}
	return nil
}

// checkPeers refuses while Tenants, Identities, ResourceSlices or Renews exist, unless
// --force. It returns them all.
func (o *Options) checkPeers(ctx context.Context, s *handshake.Side) ([]installer.PeerObject, error) {
	all, err := installer.ListPeerObjects(ctx, s.Client, s.Namespace)
	if err != nil {
		return nil, s.Explain(err, "listing Tenants, Identities, ResourceSlices and Renews")
	}
	var ours, foreign []string
	for _, p := range all {
		if p.Ours {
			ours = append(ours, p.String())
		} else {
			foreign = append(foreign, p.String())
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	if !o.Force {
		var parts []string
		if len(ours) > 0 {
			parts = append(parts, fmt.Sprintf("%s (run liqoctl unauthenticate with each peer first)", strings.Join(ours, ", ")))
		}
		if len(foreign) > 0 {
			parts = append(parts, fmt.Sprintf("%s, which liqo-auth did not make (another installation's: they and their CRDs would be kept)", strings.Join(foreign, ", ")))
		}
		return nil, fmt.Errorf("this cluster still has %s; pass --force to uninstall anyway", strings.Join(parts, "; and "))
	}
	return all, nil
}

// removePeers deletes, with --force, the peer objects of this project (in the tenant
// namespaces its records name) and keeps the others, which another installation (Liqo)
// made.
func (o *Options) removePeers(ctx context.Context, s *handshake.Side, all []installer.PeerObject) error {
	var ours, foreign []string
	for _, p := range all {
		if p.Ours {
			ours = append(ours, p.String())
		} else {
			foreign = append(foreign, p.String())
		}
	}
	for _, p := range all {
		if !p.Ours {
			continue
		}
		if t, ok := p.Object.(*authv1beta1.Tenant); ok {
			patch := client.MergeFrom(t.DeepCopy())
			controllerutil.RemoveFinalizer(t, wire.TenantFinalizer)
			if err := s.Client.Patch(ctx, t, patch); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		if err := s.Client.Delete(ctx, p.Object); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if len(ours) > 0 {
		o.Global.Printer().Warn("Deleted %s: their peers lost access without notice", strings.Join(ours, ", "))
	}
	if len(foreign) > 0 {
		o.Global.Printer().Warn("Kept %s: liqo-auth did not make them", strings.Join(foreign, ", "))
	}
	return nil
}
