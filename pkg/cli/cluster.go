package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// ClusterFlags select one cluster: a kubeconfig, a context and the Liqo namespace.
type ClusterFlags struct {
	Kubeconfig string
	Context    string
	Namespace  string
}

// AddFlags registers the flags, with a prefix ("" or "remote-") for two-cluster commands.
func (f *ClusterFlags) AddFlags(fs *pflag.FlagSet, prefix, which string) {
	fs.StringVar(&f.Kubeconfig, prefix+"kubeconfig", "", "path to the kubeconfig of the "+which+" cluster")
	fs.StringVar(&f.Context, prefix+"context", "", "kubeconfig context of the "+which+" cluster")
	if prefix == "" {
		fs.StringVarP(&f.Namespace, "namespace", "n", cluster.DefaultLiqoNamespace, "Liqo namespace of the "+which+" cluster")
	} else {
		fs.StringVar(&f.Namespace, prefix+"namespace", cluster.DefaultLiqoNamespace, "Liqo namespace of the "+which+" cluster")
	}
}

// RequireRemote refuses remote flags that name no cluster: the default kubeconfig would
// point at the local cluster.
func (f *ClusterFlags) RequireRemote() error {
	if f.Kubeconfig == "" && f.Context == "" {
		return errors.New("say which cluster is the provider: --remote-kubeconfig or --remote-context")
	}
	return nil
}

// RESTConfig loads the client configuration the flags point at.
func (f *ClusterFlags) RESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.Kubeconfig != "" {
		rules.ExplicitPath = f.Kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %q: %w", f.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "liqoctl"
	return cfg, nil
}

// Side connects to the cluster and returns it as one side of a command.
func (f *ClusterFlags) Side(scope string, report handshake.Reporter) (*handshake.Side, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("(%s) %w", scope, err)
	}
	// One connection and one discovery cache per cluster, shared with the in-process
	// controllers.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("(%s) creating a client for %s: %w", scope, cfg.Host, err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("(%s) creating a client for %s: %w", scope, cfg.Host, err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New(), HTTPClient: hc, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("(%s) creating a client for %s: %w", scope, cfg.Host, err)
	}
	return &handshake.Side{Scope: scope, Client: c, Config: cfg, HTTPClient: hc, Mapper: mapper, Namespace: f.Namespace, Report: report}, nil
}
