// Package resourceslice is liqoctl create resourceslice: the consumer asks a provider for
// a slice of resources and the narrower identity to use them with.
package resourceslice

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl create resourceslice.
type Options struct {
	Global          *cli.Global
	Name            string
	RemoteClusterID string
	CPU, Memory     string
	Pods            string
	Class           string
	Output          cli.OutputFlags
	Timeout         cli.Timeout
	Provider        cli.ProviderAccess

	resources corev1.ResourceList
}

// NewCmd returns the create resourceslice command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "resourceslice NAME",
		Aliases: []string{"resourceslices", "rslice"},
		Short:   "Ask a provider for a slice of resources and its own identity (consumer)",
		Long: `On the consumer: create a ResourceSlice for the provider, and wait until the provider
accepts or denies it. The consumer's controllers complete it (cluster IDs, a CSR of the
cluster key for user <NAME>-<hash>, group <consumer ID>), write it into the provider with
the control-plane identity, and turn an accepted answer into the Identity
resourceslice-<NAME> and its kubeconfig Secret. A denial says why.

The consumer's controllers run in liqoctl for the command when no liqo-auth-manager runs
here; the provider's too when the provider is named (--remote-kubeconfig, ...) and runs
none. Without it, the provider's own manager decides.

With -o yaml the slice is printed instead of created: apply it on this cluster by hand.`,
		Example: `  liqoctl create resourceslice slice-a --remote-cluster-id cl-provider --cpu 4 --memory 8Gi --pods 110
  liqoctl create resourceslice slice-a --remote-cluster-id cl-provider --cpu 4 --remote-kubeconfig provider.kubeconfig
  liqoctl create resourceslice slice-b --remote-cluster-id cl-provider --class gpu -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cli.AddRemoteClusterIDFlag(cmd, g, &o.RemoteClusterID, "provider")
	f := cmd.Flags()
	f.StringVar(&o.CPU, "cpu", "", "CPU requested (a quantity: 4, 500m)")
	f.StringVar(&o.Memory, "memory", "", "memory requested (a quantity: 8Gi)")
	f.StringVar(&o.Pods, "pods", "", "number of pods requested")
	f.StringVar(&o.Class, "class", "", "class of the slice (default: the provider's default class)")
	_ = cmd.RegisterFlagCompletionFunc("class", cli.SliceClassCompletion(g))
	o.Output.AddFlags(cmd, "")
	o.Timeout.AddFlags(cmd)
	o.Provider.AddFlags(cmd)
	return cmd
}

// Validate checks the name and the quantities.
func (o *Options) Validate() error {
	if err := wire.ValidateSliceName(o.Name); err != nil {
		return err
	}
	if err := cli.ValidateRemoteClusterID(o.RemoteClusterID); err != nil {
		return err
	}
	if err := o.Provider.Validate(); err != nil {
		return err
	}
	if o.Class != "" {
		if errs := validation.IsDNS1123Label(o.Class); len(errs) > 0 {
			return fmt.Errorf("--class %q is not valid: %s", o.Class, errs[0])
		}
	}
	o.resources = corev1.ResourceList{}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: o.CPU, corev1.ResourceMemory: o.Memory, corev1.ResourcePods: o.Pods} {
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() <= 0 {
			return fmt.Errorf("--%s %q is not a positive quantity (examples: 4, 500m, 8Gi)", name, v)
		}
		o.resources[name] = q
	}
	return o.Output.Validate()
}

// Run creates the slice and waits for the provider's answer, or prints it.
func (o *Options) Run(ctx context.Context) error {
	ns := wire.TenantNamespaceName(o.RemoteClusterID)
	if o.Output.Format() != "" {
		return o.Output.PrintObjects(o.Global.Streams.Out, handshake.ForgeSlice(ns, o.Name, o.RemoteClusterID, o.Class, o.resources))
	}
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, err := o.Global.LocalSide(ctx, handshake.Local)
	if err != nil {
		return err
	}
	if ns, err = s.TenantNamespace(ctx, o.RemoteClusterID); err != nil {
		return s.Errorf("no tenant namespace for provider %q: run liqoctl authenticate with it first (%w)", o.RemoteClusterID, err)
	}
	ctrls := authmanager.NewInProcess(o.Global)
	defer ctrls.Stop()
	remote, err := o.Provider.Connect(ctx, o.Global, s, o.RemoteClusterID)
	if err != nil {
		return err
	}
	if ensureErr := ctrls.Ensure(ctx, authmanager.SideRole{Side: s, Role: authmanager.Consumer}, authmanager.SideRole{Side: remote, Role: authmanager.Provider}); ensureErr != nil {
		return ensureErr
	}
	rs := handshake.ForgeSlice(ns, o.Name, o.RemoteClusterID, o.Class, o.resources)
	switch createErr := s.Client.Create(ctx, rs); {
	case apierrors.IsAlreadyExists(createErr):
		s.Report.Info("ResourceSlice %s/%s exists: waiting for the provider's answer", ns, o.Name)
	case createErr != nil:
		return s.Explain(createErr, "creating the ResourceSlice")
	default:
		s.Report.Info("ResourceSlice %s/%s created, asking for %s", ns, o.Name, authv1beta1.FormatResources(o.resources))
	}
	got, err := handshake.WaitSlice(ctx, s, client.ObjectKeyFromObject(rs), undecidedAfter, undecided(remote, o.RemoteClusterID))
	if err != nil {
		return err
	}
	o.Global.Printer().Scoped(handshake.Remote).Info("ResourceSlice accepted: %s", handshake.SliceDecision(got))
	o.Global.Printer().Scoped(handshake.Remote).Info("Certificate %s issued for the slice's identity, valid until %s", got.Status.Certificate.SerialNumber, handshake.CertificateExpiry(got))
	id, err := handshake.WaitSliceIdentity(ctx, s, ns, o.Name, got.Status.Certificate.SerialNumber)
	if err != nil {
		return err
	}
	s.Report.Info("Identity %s ready: kubeconfig in Secret %s/%s", id.Name, ns, id.Status.KubeconfigSecretRef.Name)
	return nil
}

// undecidedAfter is how long a provider may say nothing before liqoctl says what it
// waits for: its controllers answer in well under a second.
const undecidedAfter = 10 * time.Second

// undecided says what a slice waits for when the provider does not answer: a manager
// there, or, without the provider's credentials, the way to run its controllers here.
func undecided(remote *handshake.Side, providerID string) string {
	if remote != nil {
		return "its controllers run (in-process or as liqo-auth-manager); is this cluster's control-plane Identity for it still valid (liqoctl info)?"
	}
	return fmt.Sprintf("no liqo-auth-manager seems to run on provider %q: name it (--remote-kubeconfig, --remote-context) so that liqoctl runs its controllers for this command, or ask its administrator to run one (liqoctl install --with-manager)", providerID)
}
