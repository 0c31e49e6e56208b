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

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cli"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl uninstall.
type Options struct {
	Global       *cli.Global
	Force        bool
	KeepIdentity bool
	Timeout      cli.Timeout
}

// NewCmd returns the uninstall command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what liqoctl install created from the local cluster",
		Long: `Remove the CRDs, the ClusterRoles, the manager, the configuration and, unless
--keep-identity, the cluster ID and key pair (a later install makes a new identity that
peers must authenticate again). It refuses while Tenants or Identities exist, since their
peers would lose access without notice: unauthenticate them first, or pass --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "uninstall even while Tenants or Identities exist (they are deleted)")
	cmd.Flags().BoolVar(&o.KeepIdentity, "keep-identity", false, "keep the cluster ID and key pair")
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Run uninstalls.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	p := o.Global.Printer()
	s, err := o.Global.Local.Side("", p)
	if err != nil {
		return err
	}
	if err := o.removePeers(ctx, s); err != nil {
		return err
	}
	ns := s.Namespace
	var objs []client.Object
	objs = append(objs, cluster.ForgeManagerObjects(ns, "", nil)...)
	installed, err := cluster.InstallObjects(cluster.InstallOptions{Namespace: ns})
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
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster.ClusterIDConfigMapName}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster.KeysSecretName}})
	}
	for _, obj := range objs {
		if err := s.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return fmt.Errorf("deleting %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	p.Info("CRDs, ClusterRoles, manager and configuration removed")
	if o.KeepIdentity {
		p.Info("Cluster ID and key kept in namespace %q", ns)
		return nil
	}
	var n corev1.Namespace
	if err := s.Client.Get(ctx, client.ObjectKey{Name: ns}, &n); err == nil && n.Labels[cluster.ManagedByLabel] == cluster.ManagedByValue {
		if err := s.Client.Delete(ctx, &n); client.IgnoreNotFound(err) != nil {
			return err
		}
		p.Info("Namespace %q deleted", ns)
	}
	p.Info("Cluster ID and key removed")
	return nil
}

// removePeers refuses, or with --force deletes, the Tenants and Identities of the cluster.
func (o *Options) removePeers(ctx context.Context, s *handshake.Side) error {
	var tenants authv1beta1.TenantList
	var ids authv1beta1.IdentityList
	if err := s.Client.List(ctx, &tenants); err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return err
	}
	if err := s.Client.List(ctx, &ids); err != nil {
		return err
	}
	var peers []string
	for _, t := range tenants.Items {
		peers = append(peers, "Tenant "+t.Namespace+"/"+t.Name)
	}
	for _, id := range ids.Items {
		peers = append(peers, "Identity "+id.Namespace+"/"+id.Name)
	}
	if len(peers) == 0 {
		return nil
	}
	if !o.Force {
		return fmt.Errorf("this cluster still has %s: run liqoctl unauthenticate with each peer first, or pass --force", strings.Join(peers, ", "))
	}
	for i := range tenants.Items {
		t := &tenants.Items[i]
		patch := client.MergeFrom(t.DeepCopy())
		controllerutil.RemoveFinalizer(t, cluster.TenantFinalizer)
		if err := s.Client.Patch(ctx, t, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
		if err := s.Client.Delete(ctx, t); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	for i := range ids.Items {
		if err := s.Client.Delete(ctx, &ids.Items[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	o.Global.Printer().Warn("Deleted %s: their peers lost access without notice", strings.Join(peers, ", "))
	return nil
}
