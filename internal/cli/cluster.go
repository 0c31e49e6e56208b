package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// ClusterFlags select one cluster with kubectl's connection flags, cli-runtime's
// ConfigFlags (--kubeconfig, --context, --cluster, --user, --as, --as-group, --as-uid,
// --token, --server, --certificate-authority, --client-certificate, --client-key,
// --insecure-skip-tls-verify, --tls-server-name, --request-timeout...). The remote
// cluster's are the same set renamed with the remote- prefix (--remote-kubeconfig,
// --remote-context, --remote-as, --remote-token...), as Liqo's factory does. Both load
// kubeconfigs as kubectl does (KUBECONFIG with several files, exec and OIDC credential
// plugins, under the kuberc policy). -n/--namespace (--remote-namespace) is the Liqo
// namespace, not the context's.
type ClusterFlags struct {
	// Namespace is the Liqo namespace.
	Namespace string

	flags *genericclioptions.ConfigFlags
	// remote is set for the other cluster of a two-cluster command.
	remote bool
	// policy is the credential plugin policy (kuberc) applied to the loaded kubeconfig
	// (nil: kubectl's default, every plugin may run).
	policy func() (clientcmdapi.PluginPolicy, error)
	// scheme is the scheme of the side's client (nil: a new one). A scheme is only read once
	// built: the two sides of a command share one, built once.
	scheme *runtime.Scheme
}

// AddFlags registers the flags, with a prefix ("" for the local cluster, "remote-" for
// the other one of a two-cluster command).
func (f *ClusterFlags) AddFlags(fs *pflag.FlagSet, prefix, which string) {
	f.flags = genericclioptions.NewConfigFlags(false)
	// -n is the Liqo namespace; liqoctl keeps no discovery cache on disk.
	f.flags.Namespace, f.flags.CacheDir = nil, nil
	if prefix == "" {
		f.flags.AddFlags(fs)
		fs.StringVarP(&f.Namespace, "namespace", "n", wire.DefaultLiqoNamespace, "Liqo namespace of the "+which+" cluster")
		return
	}
	f.remote = true
	// Basic authentication is not offered for a cluster whose kubeconfig the other side
	// may have written.
	f.flags.Username, f.flags.Password = nil, nil
	set := pflag.NewFlagSet(prefix, pflag.ContinueOnError)
	f.flags.AddFlags(set)
	set.VisitAll(func(fl *pflag.Flag) {
		fl.Name, fl.Shorthand = prefix+fl.Name, ""
		fl.Usage = strings.TrimSuffix(fl.Usage, ".") + ", for the " + which + " cluster"
		fs.AddFlag(fl)
	})
	fs.StringVar(&f.Namespace, prefix+"namespace", wire.DefaultLiqoNamespace, "Liqo namespace of the "+which+" cluster")
}

// RequireRemote refuses remote flags that name no cluster: the default kubeconfig would
// point at the local cluster.
func (f *ClusterFlags) RequireRemote() error {
	if f.flags == nil || (value(f.flags.KubeConfig) == "" && value(f.flags.Context) == "" && value(f.flags.APIServer) == "") {
		return errors.New("say which cluster is the provider: --remote-kubeconfig, --remote-context or --remote-server")
	}
	return nil
}

func value(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// loader is the kubeconfig loading the flags select.
func (f *ClusterFlags) loader() clientcmd.ClientConfig { return f.flags.ToRawKubeConfigLoader() }

// kubeconfigPath names the kubeconfig in messages.
func (f *ClusterFlags) kubeconfigPath() string { return value(f.flags.KubeConfig) }

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
		return nil, handshake.ScopedErrorf(scope, "%w", err)
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
	if f.remote {
		var warn func(string, ...any)
		if report != nil {
			warn = report.Warn
		}
		if guardRemoteErr := guardRemote(cfg, policy, warn); guardRemoteErr != nil {
			return nil, handshake.ScopedErrorf(scope, "%w", guardRemoteErr)
		}
	}
	// One connection and one discovery cache per cluster, shared with the in-process
	// controllers.
	cfg.Wrap(newConnGate)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, handshake.ScopedErrorf(scope, "creating a client for %s: %w", cfg.Host, err)
	}
	mapper, err := newGVMapper(cfg, hc)
	if err != nil {
		return nil, handshake.ScopedErrorf(scope, "creating a client for %s: %w", cfg.Host, err)
	}
	// The connection and the first discovery documents while the command gets ready.
	mapper.Prefetch(prefetchGroupVersions...)
	sch := f.scheme
	if sch == nil {
		sch = scheme.New()
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: sch, HTTPClient: hc, Mapper: mapper})
	if err != nil {
		return nil, handshake.ScopedErrorf(scope, "creating a client for %s: %w", cfg.Host, err)
	}
	side := &handshake.Side{Scope: scope, Client: c, Config: cfg, HTTPClient: hc, Mapper: mapper, Namespace: f.Namespace, Report: report}
	if f.remote {
		side.DetectPeeringUser()
	}
	return side, nil
}
