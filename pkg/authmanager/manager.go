// Package authmanager wires the controllers of liqo-auth into a controller-runtime manager.
// The same Setup serves the long-running liqo-auth-manager, the in-process runner that
// liqoctl starts for the duration of a command, and any program that embeds the library.
package authmanager

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/consumerslice"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/designation"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/identity"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/keyrotation"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/noncecreator"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/noncesigner"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/peergc"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/providerslice"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/renewanswer"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/renewfollower"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/issuing"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/status"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/tenant"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
	"github.com/liqo-auth/liqo-auth/pkg/metrics"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
	"github.com/liqo-auth/liqo-auth/pkg/rotation"
)

// Defaults of the provider side.
const (
	DefaultNonceTTL            = cluster.DefaultNonceTTL
	DefaultCertificateLifetime = 30 * 24 * time.Hour
	DefaultCSRTimeout          = 30 * time.Second
	// DefaultPeeringAttemptTimeout bounds one handshake attempt of a Peering: a handshake
	// takes a fraction of a second; one that waits longer is tried again later.
	DefaultPeeringAttemptTimeout = 30 * time.Second
	// MinCertificateLifetime is the shortest expirationSeconds the CSR API accepts.
	MinCertificateLifetime = 10 * time.Minute
)

// Options select and configure the controllers.
type Options struct {
	// Namespace is the Liqo namespace holding the cluster identity.
	Namespace string
	// ClusterID of this cluster; read from the cluster when empty.
	ClusterID string
	// Key of this cluster; read from the cluster when nil.
	Key crypto.Signer
	// Keys are this cluster's keys as they are now (a rotation changes them while the
	// controllers run): when nil, the authentication-keys Secret read from the manager's
	// cache, which keeps it whole (no request per handshake); in-process, Key alone.
	Keys cluster.KeySource
	// Self is who the controllers talk to the API server as (the provider approves only
	// its own CertificateSigningRequests); asked with a SelfSubjectReview when nil.
	Self *authenticationv1.UserInfo
	// Role selects the controllers: a Provider runs the nonce creator and the tenant
	// controller, a Consumer the nonce signer and the identity controller.
	Role Role
	// Tenant configures the provider side.
	Tenant issuing.Options
	// WatchRenewals makes the consumer side follow its Tenants on the providers to pick up
	// renewed certificates, and renew its presence there: for a long-running manager, not
	// for a single command.
	WatchRenewals bool
	// Peerings makes the consumer side carry out the Peerings of the Liqo namespace
	// (declared peerings): a long-running manager's job, never a single command's.
	Peerings bool
	// PeeringAttemptTimeout bounds one handshake attempt of a Peering
	// (DefaultPeeringAttemptTimeout when 0).
	PeeringAttemptTimeout time.Duration
	// PresenceInterval is how often the consumer side renews its presence on each provider
	// (renewfollower.DefaultPresenceInterval when 0).
	PresenceInterval time.Duration
	// PeerGoneAfter, when set, makes the provider side delete the Tenant (and slices) of a
	// consumer that has not renewed its presence for that long.
	PeerGoneAfter time.Duration
	// SliceClasses are the ResourceSlice classes the provider offers besides the default
	// one; DisableDefaultSliceClass denies the default class.
	SliceClasses             []string
	DisableDefaultSliceClass bool
	// HonorNoHandshake lets a Tenant's authzPolicy TolerateNoHandshake skip the key match
	// of its slices (providerslice.Options).
	HonorNoHandshake bool
	// MaxSlicesPerTenant bounds how many ResourceSlices a tenant may hold
	// (providerslice.DefaultMaxPerTenant when 0).
	MaxSlicesPerTenant int
	// Metrics, when set, is where Setup registers the metrics of the controllers (the
	// manager's metrics endpoint serves controller-runtime's metrics.Registry). The
	// controllers liqoctl runs for one command leave it nil: nothing would scrape them.
	Metrics prometheus.Registerer
	// Scope is the CacheScope the manager's cache was made with (CacheOptions): Setup
	// fills it and keeps it in step. Nil when the cache keeps everything whole.
	Scope *CacheScope
}

// Complete fills defaults and validates the options.
func (o *Options) Complete() error {
	if o.Namespace == "" {
		o.Namespace = wire.DefaultLiqoNamespace
	}
	if o.Role&Both == 0 {
		return errors.New("nothing to run: enable the provider side, the consumer side, or both")
	}
	if o.Tenant.NonceTTL == 0 {
		o.Tenant.NonceTTL = DefaultNonceTTL
	}
	if o.Tenant.CertificateLifetime == 0 {
		o.Tenant.CertificateLifetime = DefaultCertificateLifetime
	}
	if o.Tenant.CSRTimeout == 0 {
		o.Tenant.CSRTimeout = DefaultCSRTimeout
	}
	if o.Tenant.CertificateLifetime < MinCertificateLifetime {
		return fmt.Errorf("the certificate lifetime %s is shorter than the %s the CertificateSigningRequest API accepts", o.Tenant.CertificateLifetime, MinCertificateLifetime)
	}
	if o.PeerGoneAfter < 0 || o.PresenceInterval < 0 {
		return errors.New("the presence interval and the grace period of a consumer that is gone cannot be negative")
	}
	if o.Tenant.RenewBefore >= o.Tenant.CertificateLifetime {
		return fmt.Errorf("renewing %s before expiry is not possible with a certificate lifetime of %s", o.Tenant.RenewBefore, o.Tenant.CertificateLifetime)
	}
	return nil
}

// CacheOptions scope the manager's informers to the objects of the protocol, so that its
// memory does not grow with the rest of the cluster: Secrets labelled for a remote
// cluster (and every Secret of the Liqo namespace, which only its administrator writes),
// namespaces labelled as tenant namespaces, the tenant records of the Liqo
// namespace liqoNS, our own Roles and CSRs. RoleBindings and ClusterRoleBindings are all
// cached, stripped to what the binding scan needs: a consumer's cluster ID must not
// already be a user with permissions here. Within those, scope (nil: none) decides what is
// kept whole: the content of Secrets and requests that are not the manager's is not kept
// (CacheScope), and no object keeps managed fields or annotations not of this project.
// Peerings are cached only with peerings set (a manager that carries them out): a cluster
// without their CRD (Liqo's, one installed by an older liqoctl) must not stop the rest.
func CacheOptions(liqoNS string, scope *CacheScope, peerings bool) cache.Options {
	return cacheOptions(liqoNS, scope, peerings, true)
}

// cacheOptions are CacheOptions; keysCached says the cache serves the controllers' key
// set (the long-running manager), and so holds every Secret of the Liqo namespace.
func cacheOptions(liqoNS string, scope *CacheScope, peerings, keysCached bool) cache.Options {
	transform := cache.TransformStripManagedFields()
	if scope != nil {
		transform = scope.transform
	}
	byObject := map[client.Object]cache.ByObject{}
	for _, w := range access.ManagerWatched() {
		if _, ok := w.Object.(*authv1beta1.Peering); ok && !peerings {
			continue
		}
		var by cache.ByObject
		if w.Label != "" {
			sel, err := labels.Parse(w.Label)
			if err != nil {
				panic(fmt.Sprintf("access.ManagerWatched: label %q of %s: %v", w.Label, w.Resource, err))
			}
			by.Label = sel
		}
		if w.InLiqoNamespace {
			by.Namespaces = map[string]cache.Config{liqoNS: {}}
		}
		if w.AllInLiqoNamespace && keysCached {
			// Besides the labelled objects everywhere else, every object of the kind in the
			// Liqo namespace, which only its administrator writes: the cluster's keys (read
			// at each handshake, watched for a rotation) and a Peering's bootstrap Secret
			// (its change wakes the Peering), whatever their labels. Their content is kept
			// only for the keys (CacheScope).
			by.Namespaces = map[string]cache.Config{
				cache.AllNamespaces: {LabelSelector: by.Label},
				liqoNS:              {LabelSelector: labels.Everything()},
			}
			by.Label = nil
		}
		if w.Stripped {
			by.Transform = stripBinding
		}
		if by.Label != nil || by.Namespaces != nil || by.Transform != nil {
			byObject[w.Object] = by
		}
	}
	// No controller reads managed fields: without them, a cached Tenant is about half its
	// size, which is most of a manager's memory with many consumers.
	return cache.Options{DefaultTransform: transform, ByObject: byObject}
}

// cacheOptionsFor are the CacheOptions of the controllers o selects: when o carries its
// key source (one command's controllers, FixedKeys), the cache holds no Secret of the Liqo
// namespace that is not labelled like the others: no controller would read the keys from it.
func cacheOptionsFor(o Options) cache.Options {
	return cacheOptions(namespaceOr(o.Namespace), o.Scope, o.Peerings, o.Keys == nil)
}

// stripBinding keeps of a cached binding what the controllers read: not its managed fields
// nor annotations (kubectl's last-applied configuration doubles a binding's size).
func stripBinding(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		o.SetAnnotations(nil)
		internRBAC(obj)
		internMeta(o)
	}
	return obj, nil
}

// WatchedTypes are the kinds the selected controllers watch or read from the cache.
func WatchedTypes(o Options) []client.Object {
	var objs []client.Object
	for _, w := range access.WatchedBy(o.Role) {
		if _, ok := w.Object.(*authv1beta1.Peering); ok && !o.Peerings {
			continue
		}
		objs = append(objs, w.Object)
	}
	return objs
}

// Setup registers the selected controllers with mgr, reading the cluster ID and key from
// the cluster when the options do not carry them.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if err := o.Complete(); err != nil {
		return err
	}
	reader := mgr.GetAPIReader()
	if err := o.readIdentity(ctx, reader); err != nil {
		return err
	}
	c, err := o.scopedClient(ctx, mgr, reader)
	if err != nil {
		return err
	}
	var counters *metrics.Metrics
	if o.Metrics != nil {
		counters = metrics.New()
		if err := counters.Register(o.Metrics, c, o.Namespace, o.ClusterID, o.Role.Has(Provider), o.Role.Has(Consumer), time.Now); err != nil {
			return fmt.Errorf("registering the metrics: %w", err)
		}
	}
	if o.Keys == nil {
		o.Keys = cluster.SecretKeys{Reader: c, Namespace: o.Namespace}
	}
	d := deps{c: c, reader: reader, rec: status.ShortNotes(mgr.GetEventRecorder(wire.ManagerName)), counters: counters}
	d.placement = placement.Placement{Cache: c, Live: reader, LiqoNamespace: o.Namespace}
	setups := []setup{
		&designation.Reconciler{Client: c, Live: reader, LiqoNamespace: o.Namespace, Recorder: d.rec},
	}
	if o.Role.Has(Provider) {
		provider, err := o.providerSetups(ctx, mgr, d)
		if err != nil {
			return err
		}
		setups = append(setups, provider...)
	}
	if o.Role.Has(Consumer) {
		consumer, err := o.consumerSetups(mgr, d)
		if err != nil {
			return err
		}
		setups = append(setups, consumer...)
	}
	if o.Peerings {
		// The long-running manager rotates the key when its Secret asks (it alone caches
		// that Secret), whichever sides it runs.
		// It decides live, not from the cache: a pass decided on a Secret the cache has not
		// caught up with would see no rotation under way and answer the request at once.
		// The cache only says whether a rotation is asked at all.
		live := liveReads{Client: d.c, reader: d.reader}
		setups = append(setups, &rotationReconciler{cached: d.c, client: live, namespace: o.Namespace, role: o.Role,
			driver: &rotation.Driver{Client: live, Namespace: o.Namespace, ClusterID: o.ClusterID, Provider: o.Role.Has(Provider), NoIdentities: !o.Role.Has(Consumer)}})
	}
	for _, s := range setups {
		if err := s.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %T: %w", s, err)
		}
	}
	return nil
}

// setup is a reconciler Setup registers with the manager.
type setup = interface{ SetupWithManager(ctrl.Manager) error }

// deps is what Setup gives every reconciler: the clients, the placement check, the event
// recorder and the metrics (nil: none).
type deps struct {
	c         client.Client
	reader    client.Reader
	placement placement.Placement
	rec       events.EventRecorder
	counters  *metrics.Metrics
}

// readIdentity is Setup's first read: the cluster ID and key the options leave unset,
// from the Liqo namespace, in that order.
func (o *Options) readIdentity(ctx context.Context, reader client.Reader) error {
	if o.ClusterID == "" {
		id, err := cluster.GetClusterID(ctx, reader, o.Namespace)
		if err != nil {
			return err
		}
		o.ClusterID = id
	}
	if o.Key == nil {
		key, err := cluster.GetClusterKey(ctx, reader, o.Namespace)
		if err != nil {
			return err
		}
		o.Key = key
	}
	return nil
}

// scopedClient is the manager's client, or, with a Scope, the client that reads live what
// the scoped cache strips, once the scope has read the tenant records and follows them.
func (o *Options) scopedClient(ctx context.Context, mgr ctrl.Manager, reader client.Reader) (client.Client, error) {
	c := mgr.GetClient()
	if o.Scope == nil {
		return c, nil
	}
	if err := o.Scope.Load(ctx, reader); err != nil {
		return nil, fmt.Errorf("reading the tenant records: %w", err)
	}
	if err := o.Scope.Follow(ctx, mgr.GetCache()); err != nil {
		return nil, err
	}
	return liveWhenStripped{Client: c, live: reader, scope: o.Scope}, nil
}

// providerSetups are the provider's reconcilers, once the manager's own user is known (it
// is excluded from the scope) and the signer is followed.
func (o *Options) providerSetups(ctx context.Context, mgr ctrl.Manager, d deps) ([]setup, error) {
	c, reader, rec := d.c, d.reader, d.rec
	if o.Self == nil {
		self, err := selfReviewer(ctx, c)
		if err != nil {
			return nil, err
		}
		o.Self = &self
	}
	self := *o.Self
	if o.Scope != nil {
		o.Scope.SetSelf(self.Username)
	}
	signatures, err := followSignatures(ctx, mgr.GetCache())
	if err != nil {
		return nil, err
	}
	// The binding scan before each issuance looks the consumer's names up in the cache's
	// index instead of reading every binding of the cluster.
	if err := revocation.IndexSubjects(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	ic := revocation.Indexed{Client: c}
	setups := []setup{
		&noncecreator.Reconciler{Client: c, Placement: d.placement, Recorder: rec, NonceTTL: o.Tenant.NonceTTL},
		&tenant.Reconciler{Client: ic, APIReader: reader, Placement: d.placement, Recorder: rec, Options: o.Tenant, Keys: o.Keys, Self: self, Metrics: d.counters, Signatures: signatures},
		&renewanswer.Reconciler{Client: c, Placement: d.placement, Recorder: rec, Keys: o.Keys, ClusterID: o.ClusterID},
		&keyrotation.Reconciler{Client: c, APIReader: reader, Placement: d.placement, Recorder: rec, Keys: o.Keys, ClusterID: o.ClusterID},
		&providerslice.Reconciler{Client: ic, APIReader: reader, Placement: d.placement, Recorder: rec, Keys: o.Keys, ClusterID: o.ClusterID, Metrics: d.counters,
			Options: providerslice.Options{Tenant: o.Tenant, Classes: o.SliceClasses, DisableDefaultClass: o.DisableDefaultSliceClass, HonorNoHandshake: o.HonorNoHandshake, MaxPerTenant: o.MaxSlicesPerTenant},
			Issuer:  &issuer.Issuer{Client: c, APIReader: reader, Self: self, Lifetime: o.Tenant.CertificateLifetime, CSRTimeout: o.Tenant.CSRTimeout, Signatures: signatures}},
	}
	if o.PeerGoneAfter > 0 {
		setups = append(setups, &peergc.Reconciler{Client: c, Keys: o.Keys, Live: reader, Placement: d.placement, Recorder: rec, GoneAfter: o.PeerGoneAfter})
	}
	return setups, nil
}

// consumerSetups are the consumer's reconcilers.
func (o *Options) consumerSetups(mgr ctrl.Manager, d deps) ([]setup, error) {
	c, rec := d.c, d.rec
	keys := o.Keys
	if keys == nil {
		keys = cluster.FixedKeys{Current: o.Key}
		if o.Peerings {
			keys = cluster.SecretKeys{Reader: c, Namespace: o.Namespace}
		}
	}
	setups := []setup{
		&noncesigner.Reconciler{Client: c, Placement: d.placement, Recorder: rec, Keys: keys},
		&identity.Reconciler{Client: c, Placement: d.placement, Recorder: rec, ClusterID: o.ClusterID, Keys: keys},
		&consumerslice.Reconciler{Client: c, Scheme: mgr.GetScheme(), Placement: d.placement, Recorder: rec, ClusterID: o.ClusterID, Keys: keys},
	}
	if o.Peerings {
		s, err := o.peeringSetup(mgr, d)
		if err != nil {
			return nil, err
		}
		setups = append(setups, s)
	}
	if o.WatchRenewals {
		setups = append(setups, &renewfollower.Reconciler{Client: c, Recorder: rec, Scheme: mgr.GetScheme(), LiqoNamespace: o.Namespace, ClusterID: o.ClusterID, Keys: keys, PresenceInterval: o.PresenceInterval})
	}
	return setups, nil
}

// followSignatures feeds issuances waiting for the signer from the cache's informer of
// CertificateSigningRequests, which the provider's controllers watch anyway.
func followSignatures(ctx context.Context, c cache.Cache) (*issuer.Signatures, error) {
	inf, err := c.GetInformer(ctx, &certificatesv1.CertificateSigningRequest{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("following the signer: %w", err)
	}
	s := issuer.NewSignatures()
	if _, err := inf.AddEventHandler(s.Handler()); err != nil {
		return nil, fmt.Errorf("following the signer: %w", err)
	}
	return s, nil
}

// ResolveAPIServer decides which API server URL and CA a provider hands to consumers:
// explicit values first, then the liqo-auth-config ConfigMap, then the client
// configuration the manager itself uses, unless that is the in-cluster service address,
// which a remote cluster cannot reach. It never guesses from node addresses.
func ResolveAPIServer(ctx context.Context, c client.Reader, ns string, cfg *rest.Config, url string, ca []byte) (string, []byte, error) {
	stored, err := cluster.GetConfig(ctx, c, ns)
	if err != nil {
		return "", nil, err
	}
	return APIServerFrom(stored, cfg, url, ca)
}

// APIServerFrom is ResolveAPIServer with the liqo-auth-config already read (stored).
func APIServerFrom(stored cluster.Config, cfg *rest.Config, url string, ca []byte) (string, []byte, error) {
	var err error
	if url == "" {
		url = stored.APIServerURL
	}
	if len(ca) == 0 {
		ca = stored.APIServerCA
	}
	inCluster := os.Getenv("KUBERNETES_SERVICE_HOST") != "" && cfg.Host == "https://"+os.Getenv("KUBERNETES_SERVICE_HOST")+":"+os.Getenv("KUBERNETES_SERVICE_PORT")
	if url == "" && !inCluster {
		url = cfg.Host
	}
	if len(ca) == 0 {
		ca = cfg.CAData
		if len(ca) == 0 && cfg.CAFile != "" {
			if ca, err = os.ReadFile(cfg.CAFile); err != nil {
				return "", nil, fmt.Errorf("reading the API server CA: %w", err)
			}
		}
	}
	return url, ca, nil
}

// liveWhenStripped is the controllers' client when the cache is scoped: a Secret the cache
// kept without its content, in a namespace recorded as a tenant namespace by now (it was
// cached a moment before its record), is read live.
type liveWhenStripped struct {
	client.Client
	live client.Reader
	// scope keeps what was read live, while the cache holds that version (nil: nothing).
	scope *CacheScope
}

// Get reads through the cache, and live when the cache kept a Secret the controllers may
// use without its content. Whether the scope knows the namespace as recorded yet does not
// matter: it follows the records a moment behind the controllers' placement check, and a
// nonce read stripped would look empty, and be filled again under the consumer's signature.
// What was read live serves again while the cache holds the same version of the Secret: a
// nonce stripped the moment it landed is read live once, not at every reconcile that
// reads it until it changes.
func (c liveWhenStripped) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	s, ok := obj.(*corev1.Secret)
	if !ok || !Stripped(s) || !secretNamed(s.Name) {
		return nil
	}
	if c.scope != nil {
		if w := c.scope.wholeCopy(key, s.ResourceVersion); w != nil {
			*s = *w
			return nil
		}
	}
	if err := c.live.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if c.scope != nil {
		// The first read of a version returns what later ones will: the copy kept.
		if w := c.scope.keepWholeCopy(s); w != nil {
			*s = *w
		}
	}
	return nil
}
