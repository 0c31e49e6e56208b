package authmanager

import (
	"context"
	"maps"
	"strings"
	"sync"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// maxAnnotation is the longest annotation value the cache keeps: the manager's own are
// timestamps, serials and short names.
const maxAnnotation = 1024

// CacheScope decides what the manager's cache keeps whole. Objects others may create in
// any number (Secrets labelled for a remote cluster in any namespace, requests labelled as
// this project's, slices the tenant writes) would otherwise be held whole in the manager's
// memory, and let anyone who may create them push it past its limit. The cache keeps:
// Secrets with their data only in the tenant namespaces this cluster's records name, and
// only those of the names the controllers use; the request and certificate of a
// CertificateSigningRequest only when the manager made it; and, on every object, only
// annotations of this project (liqo.io/), short.
type CacheScope struct {
	liqoNS string

	mu         sync.RWMutex
	namespaces map[string]int // recorded tenant namespaces, by how many records name them
	records    map[string]string
	self       string
	// identities are the UIDs of the Identities the cache has seen, by namespace/name: a
	// kubeconfig-* Secret is kept whole only when that very Identity controls it.
	identities map[string]types.UID
	// ca is the CA the Tenants' statuses publish, kept once (internTenant).
	ca sharedBytes
	// whole are Secrets the cache holds stripped because they reached it before the record
	// of their namespace did, as read live once and as the cache would have kept them: a
	// copy serves while the cache holds the same resourceVersion (liveWhenStripped). Only
	// what the scope keeps whole is held, and only while its namespace is recorded.
	whole map[client.ObjectKey]*corev1.Secret
}

// NewCacheScope returns the scope of a manager whose tenant records live in liqoNS.
func NewCacheScope(liqoNS string) *CacheScope {
	return &CacheScope{liqoNS: liqoNS, namespaces: map[string]int{}, records: map[string]string{}, identities: map[string]types.UID{},
		whole: map[client.ObjectKey]*corev1.Secret{}}
}

// Load reads, through c, the tenant records there are now: the cache fills with what it
// keeps whole from its first list on.
func (s *CacheScope) Load(ctx context.Context, c client.Reader) error {
	records, err := cluster.ListTenantRecords(ctx, c, s.liqoNS)
	if err != nil {
		return err
	}
	for _, r := range records {
		s.setRecord(wire.TenantRecordName(r.RemoteID), r.Namespace)
	}
	return nil
}

// SetSelf names the user the manager talks to the API server as: its own requests are
// kept whole.
func (s *CacheScope) SetSelf(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.self = user
}

// Follow keeps the scope in step with the tenant records, through the informer of the
// cache that holds them.
func (s *CacheScope) Follow(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	record := func(obj any) (*corev1.ConfigMap, bool) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		cm, ok := obj.(*corev1.ConfigMap)
		return cm, ok && cm.Labels[wire.TenantRecordLabel] == "true"
	}
	if _, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cm, ok := record(obj); ok {
				s.setRecord(cm.Name, cm.Data["namespace"])
			}
		},
		UpdateFunc: func(_, obj any) {
			if cm, ok := record(obj); ok {
				s.setRecord(cm.Name, cm.Data["namespace"])
			}
		},
		DeleteFunc: func(obj any) {
			if cm, ok := record(obj); ok {
				s.setRecord(cm.Name, "")
			}
		},
	}); err != nil {
		return err
	}
	// A copy read live serves only the version the cache holds: it goes when the cache
	// moves on, or the Secret goes.
	secrets, err := c.GetInformer(ctx, &corev1.Secret{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	_, err = secrets.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		// A Secret made again under the name of one deleted while its copy was being kept.
		AddFunc:    func(obj any) { s.forgetWholeCopy(obj, false) },
		UpdateFunc: func(_, obj any) { s.forgetWholeCopy(obj, false) },
		DeleteFunc: func(obj any) { s.forgetWholeCopy(obj, true) },
	})
	return err
}

// forgetWholeCopy drops the copy of Secret obj: when it is gone, or of another version.
func (s *CacheScope) forgetWholeCopy(obj any, gone bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(o)
	stale := func() bool {
		w := s.whole[key]
		return w != nil && (gone || w.UID != o.GetUID() || w.ResourceVersion != o.GetResourceVersion())
	}
	// Every Secret event of the cluster comes here: most find nothing to drop.
	s.mu.RLock()
	found := stale()
	s.mu.RUnlock()
	if !found {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if stale() {
		delete(s.whole, key)
	}
}

func (s *CacheScope) setRecord(name, ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.records[name]; ok && old == ns {
		return
	} else if ok {
		if s.namespaces[old]--; s.namespaces[old] <= 0 {
			delete(s.namespaces, old)
			maps.DeleteFunc(s.whole, func(k client.ObjectKey, _ *corev1.Secret) bool { return k.Namespace == old })
		}
		delete(s.records, name)
	}
	if ns != "" {
		s.records[name] = ns
		s.namespaces[ns]++
	}
}

func (s *CacheScope) recorded(ns string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.namespaces[ns] > 0
}

// wholeCopy returns the copy of Secret key read live at resourceVersion rv (what the
// cache holds of it, stripped), or nil.
func (s *CacheScope) wholeCopy(key client.ObjectKey, rv string) *corev1.Secret {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if w := s.whole[key]; w != nil && w.ResourceVersion == rv {
		return w.DeepCopy()
	}
	return nil
}

// keepWholeCopy keeps live, a Secret read live because the cache held it stripped, as the
// cache would keep it now: not at all when the scope would strip it too. It returns what
// it kept (a copy), nil when it kept nothing.
func (s *CacheScope) keepWholeCopy(live *corev1.Secret) *corev1.Secret {
	o, err := s.transform(live.DeepCopy())
	if err != nil {
		return nil
	}
	w := o.(*corev1.Secret)
	if Stripped(w) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.namespaces[w.Namespace] == 0 {
		return nil
	}
	s.whole[client.ObjectKeyFromObject(w)] = w
	return w.DeepCopy()
}

// setIdentity records the UID of the Identity ns/name, as the cache saw it.
func (s *CacheScope) setIdentity(ns, name string, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.identities[ns+"/"+name] = uid
}

func (s *CacheScope) identityUID(ns, name string) types.UID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.identities[ns+"/"+name]
}

func (s *CacheScope) isSelf(user string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.self != "" && s.self == user
}

// secretNamed says whether the controllers may read the content of a Secret of that name:
// one the cache kept stripped is read live.
func secretNamed(name string) bool {
	return name == wire.NonceSecretName || name == wire.SignedNonceSecretName || strings.HasPrefix(name, wire.KubeconfigSecretName(""))
}

// keptWhole says whether the cache keeps the content of Secret s of a recorded tenant
// namespace: the nonce and signed nonce by name, and a kubeconfig only when the Identity it
// is named after controls it (one per Identity; any other kubeconfig-* a Secret writer
// makes costs the manager its metadata only, and is read live if ever needed). The
// controller reference must carry the UID of the Identity the cache saw: a Secret writer
// may name a made-up Identity, which the garbage collector deletes the Secret for but a
// finalizer of the writer's keeps (TestForgedKubeconfigSecretsAreNotCachedWhole).
func (sc *CacheScope) keptWhole(s *corev1.Secret) bool {
	if s.Name == wire.NonceSecretName || s.Name == wire.SignedNonceSecretName {
		return true
	}
	identity, ok := strings.CutPrefix(s.Name, wire.KubeconfigSecretName(""))
	owner := metav1.GetControllerOf(s)
	return ok && owner != nil && owner.Kind == "Identity" && owner.APIVersion == authv1beta1.GroupVersion.String() && owner.Name == identity &&
		owner.UID != "" && owner.UID == sc.identityUID(s.Namespace, identity)
}

// ownKeys says whether s is this cluster's keys Secret (authentication-keys in the Liqo
// namespace, which only its administrator and the manager write): kept whole, as the
// controllers read the key set from the cache at each decision.
func (sc *CacheScope) ownKeys(s *corev1.Secret) bool {
	return s.Namespace == sc.liqoNS && s.Name == wire.KeysSecretName
}

// transform trims an object on its way into the cache (cache.TransformFunc).
func (s *CacheScope) transform(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil
	}
	o.SetManagedFields(nil)
	// The stripped mark is the cache's own: written on the server by anyone, it would
	// hide an object's content from what reads the cache.
	limit := maxAnnotation
	if k, isSecret := o.(*corev1.Secret); isSecret && s.ownKeys(k) {
		// The keys Secret keeps the annotations of this project whatever their length: its
		// rotate-key is any token its administrator writes, which the rotation trigger reads
		// from here first (TestRotationTriggerSeesALongToken).
		limit = 0
	}
	o.SetAnnotations(ourAnnotations(o.GetAnnotations(), limit))
	switch x := o.(type) {
	case *corev1.Secret:
		if !s.ownKeys(x) && (!s.recorded(x.Namespace) || !s.keptWhole(x)) {
			strip(x)
			// The type too: any string, of no bounded length (TestAttack37StrippedSecretKeepsNoBulk).
			x.Data, x.StringData, x.OwnerReferences, x.Type = nil, nil, nil, ""
		}
	case *authv1beta1.Identity:
		s.setIdentity(x.Namespace, x.Name, x.UID)
	case *authv1beta1.Tenant:
		s.internTenant(x)
	case *authv1beta1.ResourceSlice:
		// The tenant writes its slices: only this project's labels are read.
		x.Labels = ourLabels(x.Labels)
	case *certificatesv1.CertificateSigningRequest:
		if !s.isSelf(x.Spec.Username) {
			strip(x)
			x.Spec.Request, x.Status.Certificate = nil, nil
			x.Spec.Extra, x.Spec.Groups = nil, nil
			for i := range x.Status.Conditions {
				x.Status.Conditions[i].Message = ""
			}
		}
	}
	internRBAC(o)
	internMeta(o)
	return o, nil
}

// strip marks o as kept without its content, and keeps of it only the labels of this
// project.
func strip(o metav1.Object) {
	o.SetAnnotations(map[string]string{wire.StrippedAnnotation: "true"})
	o.SetLabels(ourLabels(o.GetLabels()))
	o.SetFinalizers(nil)
}

// ourLabels keeps the labels of this project (wire.ProjectLabel), a bounded set: a writer
// may add as many other liqo.io/ labels as the API server takes, each short.
func ourLabels(l map[string]string) map[string]string {
	maps.DeleteFunc(l, func(k, _ string) bool { return !wire.ProjectLabel(k) })
	return l
}

// ourAnnotations keeps the annotations of this project (ourAnnotation), up to limit bytes
// each (0: any length, for the keys Secret alone, which only the administrator and the
// manager write): nothing the controllers read is longer than maxAnnotation, and kubectl's
// last-applied configuration alone doubles an object. The stripped mark is never kept from
// the server: only strip writes it.
func ourAnnotations(a map[string]string, limit int) map[string]string {
	maps.DeleteFunc(a, func(k, v string) bool {
		return !ourAnnotation(k) || (limit > 0 && len(v) > limit) || k == wire.StrippedAnnotation
	})
	if len(a) == 0 {
		return nil
	}
	return a
}

// ourAnnotation says whether annotation key is of this project: liqo.io/, or liqo-auth.io/
// (the key-rotation Renew's signatures, which the keyrotation controller reads).
func ourAnnotation(key string) bool {
	return strings.HasPrefix(key, "liqo.io/") || strings.HasPrefix(key, "liqo-auth.io/")
}

// Stripped reports whether the cache kept obj without its content: a controller that
// needs it reads it live (wire.Stripped, which the metrics collector reads by too).
func Stripped(obj metav1.Object) bool { return wire.Stripped(obj) }
