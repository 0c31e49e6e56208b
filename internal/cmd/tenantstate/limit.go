package tenantstate

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// LimitOptions of liqoctl limit tenant.
type LimitOptions struct {
	Global      *cli.Global
	ClusterID   string
	CPU, Memory string
	Pods        string
	Clear       bool
	Timeout     cli.Timeout
}

// NewLimitCmd returns the limit command group with its tenant subcommand.
func NewLimitCmd(g *cli.Global) *cobra.Command {
	o := &LimitOptions{Global: g}
	sub := &cobra.Command{
		Short: "Cap what a consumer's ResourceSlices may hold together (provider)",
		Long: `On the provider: set the most a consumer's ResourceSlices may hold together, resource by
resource. A new slice (or a slice asking for more) that does not fit in what is left is
denied, saying how much is already granted; slices granted before keep what they hold.
The limits live in this cluster's tenant record, where the consumer cannot write, and
apply at the next decision of the provider's controllers: at once under liqo-auth-manager,
or when a consumer's create resourceslice runs them in-process; a slice denied for want
of room is decided again then.`,
		Example: `  liqoctl limit tenant cl-consumer --cpu 8 --memory 16Gi --pods 110
  liqoctl limit tenant cl-consumer --clear`,
	}
	f := sub.Flags()
	f.StringVar(&o.CPU, "cpu", "", "most CPU the consumer's slices may hold together")
	f.StringVar(&o.Memory, "memory", "", "most memory the consumer's slices may hold together")
	f.StringVar(&o.Pods, "pods", "", "most pods the consumer's slices may hold together")
	f.BoolVar(&o.Clear, "clear", false, "remove every limit")
	o.Timeout.AddFlags(sub)
	return tenantGroup(g, "limit", sub, &o.ClusterID, o.Run)
}

// limits parses the flags into a resource list.
func (o *LimitOptions) limits() (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: o.CPU, corev1.ResourceMemory: o.Memory, corev1.ResourcePods: o.Pods} {
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("--%s %q is not a quantity (examples: 8, 500m, 16Gi)", name, v)
		}
		out[name] = q
	}
	switch {
	case o.Clear && len(out) > 0:
		return nil, fmt.Errorf("--clear goes alone")
	case !o.Clear && len(out) == 0:
		return nil, fmt.Errorf("give at least one of --cpu, --memory, --pods, or --clear")
	}
	return out, nil
}

// Run writes the limits into the tenant record.
func (o *LimitOptions) Run(ctx context.Context) error {
	limits, err := o.limits()
	if err != nil {
		return err
	}
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, err := o.Global.LocalSide(ctx, "")
	if err != nil {
		return err
	}
	err = cluster.UpdateTenantRecord(ctx, s.Client, s.Client, s.Namespace, o.ClusterID, false, func(rec *cluster.TenantRecord) error {
		if o.Clear {
			rec.SliceLimits = nil
			return nil
		}
		if rec.SliceLimits == nil {
			rec.SliceLimits = corev1.ResourceList{}
		}
		for n, q := range limits {
			rec.SliceLimits[n] = q
		}
		limits = rec.SliceLimits
		return nil
	})
	if err != nil {
		return s.Explain(err, "writing the limits of "+o.ClusterID)
	}
	if o.Clear {
		s.Report.Info("No limit on the ResourceSlices of %s", o.ClusterID)
		return nil
	}
	s.Report.Info("The ResourceSlices of %s may hold together at most %s", o.ClusterID, authv1beta1.FormatResources(limits))
	return nil
}
