package cli

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

const completionTimeout = 3 * time.Second

// RegisterClusterCompletions completes the context and namespace flags of one cluster
// (prefix "" or "remote-") from its kubeconfig and API server.
func RegisterClusterCompletions(cmd *cobra.Command, f *ClusterFlags, prefix string) {
	_ = cmd.RegisterFlagCompletionFunc(prefix+"context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return contexts(f), cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc(prefix+"namespace", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return namespaces(f), cobra.ShellCompDirectiveNoFileComp
	})
}

// RegisterGlobalCompletions completes the global --context and --namespace flags.
func RegisterGlobalCompletions(root *cobra.Command, g *Global) {
	RegisterClusterCompletions(root, &g.Local, "")
}

// RemoteClusterIDCompletion completes --remote-cluster-id with the cluster IDs of the
// local cluster's tenant namespaces.
func RemoteClusterIDCompletion(g *Global) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		var list corev1.NamespaceList
		if err := listWith(ctx, &g.Local, &list, client.MatchingLabels{wire.TenantNamespaceLabel: "true"}); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var ids []string
		for _, ns := range list.Items {
			if id := ns.Labels[wire.RemoteClusterIDLabel]; id != "" {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

// SliceNameCompletion completes the names of the ResourceSlices this cluster asked for
// (of the provider given with --remote-cluster-id, when set).
func SliceNameCompletion(g *Global) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		sel := client.MatchingLabels{wire.ReplicationRequestedLabel: "true"}
		if f := cmd.Flags().Lookup("remote-cluster-id"); f != nil && f.Value.String() != "" {
			sel[wire.RemoteClusterIDLabel] = f.Value.String()
		}
		var list authv1beta1.ResourceSliceList
		if err := listWith(ctx, &g.Local, &list, sel); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := make([]string, 0, len(list.Items))
		for _, rs := range list.Items {
			names = append(names, rs.Name)
		}
		sort.Strings(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// SliceClassCompletion completes slice classes: the default one, and those of the slices
// this cluster already holds (a provider does not publish its classes to consumers).
func SliceClassCompletion(g *Global) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		seen := map[string]bool{"default": true}
		var list authv1beta1.ResourceSliceList
		if listWith(ctx, &g.Local, &list, client.MatchingLabels{wire.ReplicationRequestedLabel: "true"}) == nil {
			for _, rs := range list.Items {
				if rs.Status.Class != "" {
					seen[string(rs.Status.Class)] = true
				}
			}
		}
		classes := make([]string, 0, len(seen))
		for c := range seen {
			classes = append(classes, c)
		}
		sort.Strings(classes)
		return classes, cobra.ShellCompDirectiveNoFileComp
	}
}

func contexts(f *ClusterFlags) []string {
	cfg, err := f.loader().RawConfig()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func namespaces(f *ClusterFlags) []string {
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	var list corev1.NamespaceList
	if err := listWith(ctx, f, &list); err != nil {
		return nil
	}
	out := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		out = append(out, ns.Name)
	}
	return out
}

func listWith(ctx context.Context, f *ClusterFlags, list client.ObjectList, opts ...client.ListOption) error {
	s, err := f.Side("", nil)
	if err != nil {
		return err
	}
	return s.Client.List(ctx, list, opts...)
}

// AddRemoteClusterIDFlag registers the required --remote-cluster-id flag of the manual
// flow, completed with the cluster IDs of the local tenant namespaces. role names the
// other cluster in the help ("consumer" or "provider").
func AddRemoteClusterIDFlag(cmd *cobra.Command, g *Global, id *string, role string) {
	AddClusterIDFlag(cmd, g, id, "remote-cluster-id", role)
}

// AddClusterIDFlag registers a required flag naming the other cluster, completed with the
// cluster IDs of the local tenant namespaces.
func AddClusterIDFlag(cmd *cobra.Command, g *Global, id *string, name, role string) {
	cmd.Flags().StringVar(id, name, "", "cluster ID of the "+role)
	_ = cmd.MarkFlagRequired(name)
	_ = cmd.RegisterFlagCompletionFunc(name, RemoteClusterIDCompletion(g))
}

// ValidateRemoteClusterID checks the value of --remote-cluster-id.
func ValidateRemoteClusterID(id string) error {
	return ValidateClusterIDFlag("--remote-cluster-id", id)
}

// ValidateClusterIDFlag checks the cluster ID given to flag.
func ValidateClusterIDFlag(flag, id string) error {
	if err := cluster.ValidateClusterID(id); err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}
