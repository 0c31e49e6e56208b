// Command liqo-auth-manager runs the controllers of the Liqo authentication handshake in
// a cluster: the provider side (nonces, Tenants, certificates, bindings) and the consumer
// side (signatures, Identities, kubeconfigs). It runs in the cluster, or beside it with
// --kubeconfig.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-auth/liqo-auth/internal/version"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/providerslice"
)

type flags struct {
	kubeconfig, apiServerURL, apiServerCAFile, metricsAddr, healthAddr, pprofAddr string
	leaderElect, provider, consumer, showVersion, metricsSecure                   bool
	// restartForPeerings: the Peering CRD is missing; the manager ends once it is
	// installed, to be started again carrying out Peerings.
	restartForPeerings bool
	// restartForAPIServer: a provider without an API server URL to hand consumers; the
	// manager ends once liqo-auth-config names one, to be started again with it.
	restartForAPIServer bool
	qps                 float32
	burst               int
	// leaseDuration, renewDeadline and retryPeriod time the leader election.
	leaseDuration, renewDeadline, retryPeriod time.Duration
	opts                                      authmanager.Options
	zap                                       zap.Options
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "liqo-auth-manager:", err)
		os.Exit(1)
	}
}

func parse(args []string) (*flags, error) {
	f := &flags{}
	fs := pflag.NewFlagSet("liqo-auth-manager", pflag.ContinueOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: in-cluster configuration)")
	fs.StringVar(&f.opts.Namespace, "namespace", wire.DefaultLiqoNamespace, "Liqo namespace")
	fs.StringVar(&f.opts.ClusterID, "cluster-id", "", "cluster ID (default: read from the cluster)")
	fs.StringVar(&f.apiServerURL, "api-server-url", "", "API server URL advertised in identities (default: liqoctl install's, else the kubeconfig's)")
	fs.StringVar(&f.apiServerCAFile, "api-server-ca-file", "", "PEM CA bundle of --api-server-url")
	fs.DurationVar(&f.opts.Tenant.CertificateLifetime, "certificate-lifetime", 0, "lifetime of issued certificates (default: liqoctl install's, else 720h)")
	fs.DurationVar(&f.opts.Tenant.RenewBefore, "renew-before", 0, "renew a certificate when less than this remains (default: after two thirds of its lifetime)")
	fs.DurationVar(&f.opts.Tenant.CSRTimeout, "csr-timeout", authmanager.DefaultCSRTimeout, "how long an approved CSR may wait for its certificate before it is reported")
	fs.DurationVar(&f.opts.Tenant.NonceTTL, "nonce-ttl", 0, "how long a nonce may be used after it was created (default: liqoctl install's, else 15m)")
	fs.StringSliceVar(&f.opts.SliceClasses, "resource-slice-classes", nil, "ResourceSlice classes offered besides the default one")
	fs.BoolVar(&f.opts.DisableDefaultSliceClass, "disable-default-resource-slice-class", false, "deny ResourceSlices of the default class")
	fs.BoolVar(&f.opts.HonorNoHandshake, "honor-tolerate-no-handshake", false, "let a Tenant's authzPolicy TolerateNoHandshake skip the key match of its ResourceSlices (whoever may write the Tenant may set that policy)")
	fs.IntVar(&f.opts.MaxSlicesPerTenant, "max-resource-slices-per-tenant", providerslice.DefaultMaxPerTenant, "how many ResourceSlices one tenant may hold; later ones are denied")
	fs.DurationVar(&f.opts.PeerGoneAfter, "peer-gone-after", 0, "provider side: delete the Tenant and slices of a consumer that has not renewed its presence Lease for this long (0: never). Consumers renew it every --presence-interval while their liqo-auth-manager runs; Liqo's controllers and liqoctl alone do not")
	fs.DurationVar(&f.opts.PresenceInterval, "presence-interval", 0, "consumer side: how often to renew this cluster's presence on each provider (default 1m)")
	fs.BoolVar(&f.provider, "provider", true, "run the provider side")
	fs.BoolVar(&f.consumer, "consumer", true, "run the consumer side")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect a leader among replicas through the Lease liqo-auth-manager; without it, the manager still holds that Lease while no other manager does, so that liqoctl sees it")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a leader's Lease holds without renewal: a manager that crashed is replaced after it")
	fs.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew its Lease before it stops (longer, with a longer lease, rides out an API server flooded by thousands of handshakes at once)")
	fs.DurationVar(&f.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often the leader renews its Lease, and a candidate tries to take it")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0", "metrics address (0 disables)")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", false, "serve metrics over HTTPS (a self-signed certificate) to clients the API server authenticates (TokenReview) and allows to get /metrics (SubjectAccessReview), as in a Pod")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "0", "address serving Go's net/http/pprof profiles, e.g. 127.0.0.1:6060 (0 disables; profiles reveal memory contents: bind it to loopback only)")
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", "", "health probes address (0 disables; default :8081 in a Pod, disabled beside a cluster with --kubeconfig, so that several managers share a host)")
	fs.Float32Var(&f.qps, "kube-api-qps", authmanager.DefaultQPS, "API requests per second")
	fs.IntVar(&f.burst, "kube-api-burst", authmanager.DefaultBurst, "API request burst")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	gofs := flag.NewFlagSet("zap", flag.ContinueOnError)
	f.zap.BindFlags(gofs)
	fs.AddGoFlagSet(gofs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if !(f.retryPeriod > 0 && f.retryPeriod < f.renewDeadline && f.renewDeadline < f.leaseDuration) {
		return nil, fmt.Errorf("leader election: --leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s) is required", f.retryPeriod, f.renewDeadline, f.leaseDuration)
	}
	if f.healthAddr == "" {
		f.healthAddr = ":8081"
		if f.kubeconfig != "" {
			f.healthAddr = "0"
		}
	}
	f.opts.WatchRenewals = true
	f.opts.Peerings = true
	if f.provider {
		f.opts.Role |= authmanager.Provider
	}
	if f.consumer {
		f.opts.Role |= authmanager.Consumer
	}
	return f, nil
}

func run() error {
	f, err := parse(os.Args[1:])
	if errors.Is(err, pflag.ErrHelp) {
		return nil // the usage is printed
	}
	if err != nil {
		return err
	}
	if checkListensErr := checkListens(f); checkListensErr != nil {
		return checkListensErr
	}
	if f.showVersion {
		fmt.Println("liqo-auth-manager", version.Get())
		return nil
	}
	log := zap.New(zap.UseFlagOptions(&f.zap))
	ctrl.SetLogger(log)
	if setGCPercent() {
		log.V(1).Info("Go collector set", "GOGC", gcPercent)
	}
	if soft := setMemoryLimit("/sys/fs/cgroup"); soft > 0 {
		log.Info("Go memory limit set under the container's", "bytes", soft)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, direct, err := connect(ctx, f)
	if err != nil {
		return err
	}
	if completeOptionsErr := completeOptions(ctx, f, direct, cfg, log); completeOptionsErr != nil {
		return completeOptionsErr
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.New(), Cache: authmanager.CacheOptions(f.opts.Namespace, f.opts.Scope, f.opts.Peerings),
		Metrics:                metricsOptions(f),
		PprofBindAddress:       f.pprofAddr,
		HealthProbeBindAddress: f.healthAddr,
		LeaderElection:         f.leaderElect, LeaderElectionID: wire.ManagerName, LeaderElectionNamespace: f.opts.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptrDuration(f.leaseDuration), RenewDeadline: ptrDuration(f.renewDeadline), RetryPeriod: ptrDuration(f.retryPeriod),
		LeaderElectionLabels:    authmanager.VersionLabels(),
		GracefulShutdownTimeout: ptrDuration(10 * time.Second),
		Controller:              authmanager.ControllerConfig(),
		NewCache:                authmanager.NewCache,
	})
	if err != nil {
		return err
	}
	if err := authmanager.Setup(ctx, mgr, f.opts); err != nil {
		return err
	}
	if restartErr := addRestartForPeerings(mgr, f, cfg); restartErr != nil {
		return restartErr
	}
	if !f.leaderElect {
		if err := addPresence(mgr, f, direct, log); err != nil {
			return err
		}
	}
	if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping), mgr.AddReadyzCheck("ping", healthz.Ping)); err != nil {
		return err
	}
	log.Info("starting", "version", version.Get().Version, "clusterID", f.opts.ClusterID, "role", f.opts.Role.String())
	return mgr.Start(ctx)
}

// metricsOptions serve metrics on --metrics-bind-address; with --metrics-secure, over
// HTTPS and only to clients allowed to get /metrics.
func metricsOptions(f *flags) metricsserver.Options {
	o := metricsserver.Options{BindAddress: f.metricsAddr}
	if f.metricsSecure {
		o.SecureServing, o.FilterProvider = true, metricsAuthFilter
	}
	return o
}

// addRestartForPeerings has a manager started before the Peering CRD was installed end
// itself once it is (authmanager.RestartWhenPeeringsServed), and a provider started
// without an API server URL once liqo-auth-config names one
// (authmanager.RestartWhenAPIServerKnown).
func addRestartForPeerings(mgr ctrl.Manager, f *flags, cfg *rest.Config) error {
	if !f.restartForPeerings && !f.restartForAPIServer {
		return nil
	}
	watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	if f.restartForAPIServer {
		if err := mgr.Add(authmanager.RestartWhenAPIServerKnown{Client: watcher, Namespace: f.opts.Namespace}); err != nil {
			return err
		}
	}
	if !f.restartForPeerings {
		return nil
	}
	return mgr.Add(authmanager.RestartWhenPeeringsServed{Client: watcher})
}

// checkListens refuses, before anything else is done, a listen address that is not one:
// health probes, metrics and pprof, in that order.
func checkListens(f *flags) error {
	if err := checkListen("--health-probe-bind-address", f.healthAddr); err != nil {
		return err
	}
	if err := checkListen("--metrics-bind-address", f.metricsAddr); err != nil {
		return err
	}
	return checkListen("--pprof-bind-address", f.pprofAddr)
}

// connect is run's first step on the cluster: the client configuration (from --kubeconfig,
// or controller-runtime's lookup) with the flags' rate limits, a direct client, and the
// cluster ID and key pair it reads or fills (prepare).
func connect(ctx context.Context, f *flags) (*rest.Config, client.Client, error) {
	var cfg *rest.Config
	var err error
	if f.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	} else {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("loading the cluster configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = f.qps, f.burst
	direct, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, nil, err
	}
	if err := prepare(ctx, f, direct, cfg.Host); err != nil {
		return nil, nil, err
	}
	return cfg, direct, nil
}

// completeOptions fills the manager's options from the flags and the cluster: defaults,
// the cache scope, the metrics registry unless metrics are off, and, on a provider, the
// API server and CA given to tenants.
func completeOptions(ctx context.Context, f *flags, direct client.Client, cfg *rest.Config, log logr.Logger) error {
	if err := f.opts.Complete(); err != nil {
		return err
	}
	f.opts.Scope = authmanager.NewCacheScope(f.opts.Namespace)
	if f.opts.Peerings && f.opts.Role.Has(authmanager.Consumer) && !authmanager.PeeringsServed(direct.RESTMapper()) {
		log.Info("the Peering CRD is not installed: declared peerings are not carried out until it is (liqoctl install installs it); the manager restarts itself when it is")
		f.opts.Peerings = false
		f.restartForPeerings = true
	}
	if f.metricsAddr != "0" {
		f.opts.Metrics = ctrlmetrics.Registry
	}
	if !f.opts.Role.Has(authmanager.Provider) {
		return nil
	}
	var ca []byte
	var err error
	if f.apiServerCAFile != "" {
		if ca, err = os.ReadFile(f.apiServerCAFile); err != nil {
			return fmt.Errorf("reading --api-server-ca-file: %w", err)
		}
	}
	if f.opts.Tenant.APIServer, f.opts.Tenant.CA, err = authmanager.ResolveAPIServer(ctx, direct, f.opts.Namespace, cfg, f.apiServerURL, ca); err != nil {
		return err
	}
	log.Info("provider side", "apiServer", f.opts.Tenant.APIServer, "certificateLifetime", f.opts.Tenant.CertificateLifetime.String())
	if f.opts.Tenant.APIServer == "" {
		log.Info("no API server URL to hand consumers: handshakes wait until " + wire.ConfigMapName + " names one (" + cluster.ConfigAPIServerURL + "; liqoctl install --api-server-url records it), and the manager restarts then")
		f.restartForAPIServer = true
	}
	return nil
}

// addPresence adds, without leader election, the lease that tells another manager of the
// same cluster that this one runs.
func addPresence(mgr ctrl.Manager, f *flags, direct client.Client, log logr.Logger) error {
	id, err := presenceIdentity()
	if err != nil {
		return err
	}
	return mgr.Add(&authmanager.Presence{
		Client: direct, Namespace: f.opts.Namespace, Identity: id,
		Duration: 15 * time.Second, Renew: 5 * time.Second, Logger: log.WithName("presence"),
	})
}

// prepare reads the cluster ID and the key pair. An installation applied from a manifest
// (liqoctl install -o yaml, the release manifest) has neither: the manager fills the
// ConfigMap and the Secret the manifest left empty, at its first start.
func prepare(ctx context.Context, f *flags, c client.Client, host string) error {
	id, _, err := cluster.EnsureClusterID(ctx, c, f.opts.Namespace, f.opts.ClusterID)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("cluster %s is not installed in namespace %q: run liqoctl install, or apply the release manifest, first (%w)", host, f.opts.Namespace, err)
		}
		return fmt.Errorf("cluster %s: %w", host, err)
	}
	f.opts.ClusterID = id
	cfg, err := cluster.GetConfig(ctx, c, f.opts.Namespace)
	if err != nil {
		return err
	}
	if f.opts.Tenant.CertificateLifetime == 0 {
		f.opts.Tenant.CertificateLifetime = cfg.CertificateLifetime
	}
	if f.opts.Tenant.NonceTTL == 0 {
		f.opts.Tenant.NonceTTL = cfg.NonceTTL
	}
	key, _, err := cluster.EnsureClusterKey(ctx, c, f.opts.Namespace, authn.Ed25519)
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("cluster %s has no key pair yet and this manager may not create one: run liqoctl install, or apply the release manifest, first (%w)", host, err)
	}
	f.opts.Key = key
	return err
}

// checkListen says which flag to change when an address the manager would listen on is
// taken (by another liqo-auth-manager on the same host, most often), before anything
// starts.
func checkListen(flag, addr string) error {
	if addr == "" || addr == "0" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (%w): another liqo-auth-manager on this host? Set %s to a free address, or 0 to disable it", addr, err, flag)
	}
	return l.Close()
}

func ptrDuration(d time.Duration) *time.Duration { return &d }

// presenceIdentity names this process in its Lease, as leader election does: host name
// and a random suffix.
func presenceIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("naming this manager for its Lease: %w", err)
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return "", err
	}
	return host + "_" + hex.EncodeToString(suffix), nil
}
