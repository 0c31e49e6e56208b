package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// ClusterFlags select one cluster with kubectl's connection flags. The local cluster's are
// cli-runtime's ConfigFlags (--kubeconfig, --context, --cluster, --user, --as, --as-group,
// --as-uid, --token, --server, --certificate-authority, --client-certificate,
// --client-key, --insecure-skip-tls-verify, --tls-server-name, --request-timeout...); the
// remote cluster's are client-go's override flags with the remote- prefix
// (--remote-kubeconfig, --remote-context, --remote-as, --remote-token...). Both load
// kubeconfigs as kubectl does (KUBECONFIG with several files, exec and OIDC credential
// plugins). -n/--namespace (--remote-namespace) is the Liqo namespace, not the context's.
type ClusterFlags struct {
	// Namespace is the Liqo namespace.
	Namespace string

	local *genericclioptions.ConfigFlags
	// kubeconfig and overrides are the remote cluster's flags.
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
	// policy is the credential plugin policy (kuberc) applied to the loaded kubeconfig
	// (nil: kubectl's default, every plugin may run).
	policy func() (clientcmdapi.PluginPolicy, error)
}

// AddFlags registers the flags, with a prefix ("" for the local cluster, "remote-" for
// the other one of a two-cluster command).
func (f *ClusterFlags) AddFlags(fs *pflag.FlagSet, prefix, which string) {
	if prefix == "" {
		f.local = genericclioptions.NewConfigFlags(false)
		// -n is the Liqo namespace; liqoctl keeps no discovery cache on disk.
		f.local.Namespace, f.local.CacheDir = nil, nil
		f.local.AddFlags(fs)
		fs.StringVarP(&f.Namespace, "namespace", "n", wire.DefaultLiqoNamespace, "Liqo namespace of the "+which+" cluster")
		return
	}
	names := clientcmd.RecommendedConfigOverrideFlags(prefix)
	names.ContextOverrideFlags.Namespace = clientcmd.FlagInfo{} // the Liqo namespace, below
	names.AuthOverrideFlags.Username, names.AuthOverrideFlags.Password = clientcmd.FlagInfo{}, clientcmd.FlagInfo{}
	fs.StringVar(&f.kubeconfig, prefix+"kubeconfig", "", "path to the kubeconfig of the "+which+" cluster")
	clientcmd.BindOverrideFlags(&f.overrides, fs, names)
	fs.StringVar(&f.Namespace, prefix+"namespace", wire.DefaultLiqoNamespace, "Liqo namespace of the "+which+" cluster")
}

// RequireRemote refuses remote flags that name no cluster: the default kubeconfig would
// point at the local cluster.
func (f *ClusterFlags) RequireRemote() error {
	if f.kubeconfig == "" && f.overrides.CurrentContext == "" && f.overrides.ClusterInfo.Server == "" {
		return errors.New("say which cluster is the provider: --remote-kubeconfig, --remote-context or --remote-server")
	}
	return nil
}

// loader is the kubeconfig loading the flags select.
func (f *ClusterFlags) loader() clientcmd.ClientConfig {
	if f.local != nil {
		return f.local.ToRawKubeConfigLoader()
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &f.overrides)
}

// kubeconfigPath names the kubeconfig in messages.
func (f *ClusterFlags) kubeconfigPath() string {
	if f.local != nil && f.local.KubeConfig != nil {
		return *f.local.KubeConfig
	}
	return f.kubeconfig
}

// RESTConfig loads the client configuration the flags point at.
func (f *ClusterFlags) RESTConfig() (*rest.Config, error) {
	cfg, err := f.loader().ClientConfig()
	if err != nil {
		if p := f.kubeconfigPath(); p != "" {
			return nil, fmt.Errorf("loading kubeconfig %q: %w", p, err)
		}
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "liqoctl"
	return cfg, nil
}

// Side connects to the cluster and returns it as one side of a command. The credential
// plugin policy applies to every kubeconfig; the remote one, a file the other side may
// have written, is also checked against it before anything runs, and what it would run or
// read on this machine is said through report (a nil report, for shell completion, refuses
// such a kubeconfig).
func (f *ClusterFlags) Side(scope string, report handshake.Reporter) (*handshake.Side, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("%s%w", handshake.Scoped(scope), err)
	}
	var policy clientcmdapi.PluginPolicy
	if f.policy != nil {
		if policy, err = f.policy(); err != nil {
			return nil, err
		}
	}
	if cfg.ExecProvider != nil {
		cfg.ExecProvider.PluginPolicy = policy
	}
	if f.local == nil {
		var warn func(string, ...any)
		if report != nil {
			warn = report.Warn
		}
		if err := guardRemote(cfg, policy, warn); err != nil {
			return nil, fmt.Errorf("%s%w", handshake.Scoped(scope), err)
		}
	}
	// One connection and one discovery cache per cluster, shared with the in-process
	// controllers.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("%screating a client for %s: %w", handshake.Scoped(scope), cfg.Host, err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("%screating a client for %s: %w", handshake.Scoped(scope), cfg.Host, err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New(), HTTPClient: hc, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("%screating a client for %s: %w", handshake.Scoped(scope), cfg.Host, err)
	}
	return &handshake.Side{Scope: scope, Client: c, Config: cfg, HTTPClient: hc, Mapper: mapper, Namespace: f.Namespace, Report: report}, nil
}
