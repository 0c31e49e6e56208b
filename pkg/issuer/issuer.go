// Package issuer has client certificates signed by the cluster's own client signer
// (kubernetes.io/kube-apiserver-client) for the objects a provider accepted: a Tenant's
// control-plane identity, a ResourceSlice's narrower one. It creates one
// CertificateSigningRequest per issuance under a name the API server makes unique,
// approves only a request it created itself (requested by its own identity, as the API
// server recorded it, with exactly the accepted request bytes, signer, usages and
// lifetime), reports pending requests others made with the same labels, and never touches
// them.
package issuer

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// Subject is what a certificate is issued for: the accepted object and its request.
type Subject struct {
	// Owner is the accepted object (a Tenant, a ResourceSlice): its UID labels the CSRs.
	Owner client.Object
	// Annotation is the annotation naming Owner ("namespace/name") on its CSRs, by which
	// watches map a CSR back to it.
	Annotation string
	// RemoteID is the consumer's cluster ID, also a label of the CSRs.
	RemoteID string
	// Request is the accepted PEM certificate request.
	Request []byte
	// CurrentSerial is the serial (hex) of the certificate the issuance replaces.
	CurrentSerial string
	// Reason is the reason of the approval condition; Message its message.
	Reason, Message string
}

// Issuance is the state of the certificate a reconcile is waiting for.
type Issuance struct {
	Cert *x509.Certificate
	PEM  []byte
	// Reason and Message explain why there is no certificate yet, or why it failed.
	Reason, Message string
	RequeueAfter    time.Duration
}

// Issuer creates and approves CertificateSigningRequests.
type Issuer struct {
	Client client.Client
	// APIReader reads the API server, where a CSR created a moment ago is found.
	APIReader client.Reader
	// Self is who the manager is to the API server: the only requester it approves.
	Self authenticationv1.UserInfo
	// Lifetime of the certificates, and how long to wait for the signer.
	Lifetime, CSRTimeout time.Duration
	// Signatures, when set, lets the call that approves a request wait up to SignerWait
	// (DefaultSignerWait when 0) for the signer's answer, read from the cache, instead of
	// reporting the certificate pending at once.
	Signatures *Signatures
	SignerWait time.Duration

	// created remembers, per owner UID, the last CSR this process created, until the
	// cache holds it.
	created sync.Map
	// deleted remembers the CSRs this process deleted, by UID, for a while: a cache that
	// has not seen the deletion yet still lists them, and they are not deleted twice.
	deleted sync.Map
	// swept is when forgetDeleted last went through deleted (Unix nanoseconds).
	swept atomic.Int64
}

// deletedMemory is how long a deleted CSR is remembered: far longer than a cache takes to
// see a deletion.
const deletedMemory = time.Minute

// forgetDeleted drops the deletions remembered for longer than deletedMemory. It goes
// through them at most once every tenth of deletedMemory: it is called at every reconcile
// of an owner (DeleteLeftovers), and a fleet's handshakes remember a deletion each.
func (i *Issuer) forgetDeleted(now time.Time) {
	last := i.swept.Load()
	if now.UnixNano()-last < int64(deletedMemory/10) || !i.swept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	i.deleted.Range(func(k, v any) bool {
		if now.Sub(v.(time.Time)) > deletedMemory {
			i.deleted.Delete(k)
		}
		return true
	})
}

// Usages are the key usages of every certificate.
func Usages() []certificatesv1.KeyUsage {
	return []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
}

// Own reports whether csr is one this manager created for the current issuance of s.
func (i *Issuer) Own(csr *certificatesv1.CertificateSigningRequest, s Subject) bool {
	return i.RequestedBySelf(csr) && csr.Labels[wire.TenantUIDLabel] == string(s.Owner.GetUID()) &&
		csr.Annotations[wire.ReplacesAnnotation] == s.CurrentSerial &&
		bytes.Equal(csr.Spec.Request, s.Request) && csr.Spec.SignerName == certificatesv1.KubeAPIServerClientSignerName &&
		sameUsages(csr.Spec.Usages, Usages()) &&
		ptr.Deref(csr.Spec.ExpirationSeconds, 0) == int32(i.Lifetime/time.Second)
}

// RequestedBySelf reports whether the API server recorded this manager as csr's requester.
func (i *Issuer) RequestedBySelf(csr *certificatesv1.CertificateSigningRequest) bool {
	return i.Self.Username != "" && csr.Spec.Username == i.Self.Username && csr.Spec.UID == i.Self.UID
}

func sameUsages(a, b []certificatesv1.KeyUsage) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Find returns this manager's CSR for the current issuance of s, if one exists, and the
// pending CSRs carrying s's labels that somebody else requested. It reads the cache; a CSR
// this process created a moment ago, which the cache may not hold yet, is read from the
// API server by the name remembered at creation, so that no second request is ever made.
func (i *Issuer) Find(ctx context.Context, s Subject) (own *certificatesv1.CertificateSigningRequest, foreign []string, err error) {
	var list certificatesv1.CertificateSigningRequestList
	if err := i.Client.List(ctx, &list, client.MatchingLabels{wire.TenantUIDLabel: string(s.Owner.GetUID())}); err != nil {
		return nil, nil, err
	}
	for k := range list.Items {
		csr := &list.Items[k]
		switch {
		case i.Own(csr, s):
			own = csr
		case !i.RequestedBySelf(csr) && Pending(csr):
			foreign = append(foreign, fmt.Sprintf("%s (requested by %q)", csr.Name, csr.Spec.Username))
		}
	}
	if name, ok := i.created.Load(s.Owner.GetUID()); ok && own == nil {
		csr := &certificatesv1.CertificateSigningRequest{}
		err := i.APIReader.Get(ctx, client.ObjectKey{Name: name.(string)}, csr)
		switch {
		case err == nil && i.Own(csr, s):
			own = csr
		case err != nil && !apierrors.IsNotFound(err):
			return nil, nil, err
		}
	}
	return own, foreign, nil
}

// Pending reports whether csr is neither approved, denied nor failed.
func Pending(csr *certificatesv1.CertificateSigningRequest) bool {
	approved, denied, failed := CSRState(csr)
	return approved == nil && denied == nil && failed == nil
}

// Ensure creates (once) and approves this manager's CertificateSigningRequest for s, and
// returns the certificate once the signer issued it. check runs right before a request is
// submitted or approved: a non-nil Issuance it returns refuses the submission, saying why.
// foreign lists the pending requests others made with s's labels.
func (i *Issuer) Ensure(ctx context.Context, s Subject, now time.Time, check func(context.Context) (*Issuance, error)) (is *Issuance, foreign []string, err error) {
	csr, foreign, refusal, err := i.findOrCreate(ctx, s, check)
	if refusal != nil || err != nil {
		return refusal, foreign, err
	}
	approved, denied, failed := CSRState(csr)
	switch {
	case denied != nil:
		return &Issuance{Reason: authv1beta1.ReasonCSRDenied, Message: fmt.Sprintf("CertificateSigningRequest %s was denied: %s", csr.Name, denied.Message)}, foreign, nil
	case failed != nil:
		return &Issuance{Reason: authv1beta1.ReasonCSRFailed, Message: fmt.Sprintf("the signer failed CertificateSigningRequest %s: %s", csr.Name, failed.Message)}, foreign, nil
	case approved == nil:
		if i.Signatures != nil {
			answered, done := i.Signatures.expect(csr.Name)
			defer done()
			defer func() { is = i.afterApproval(ctx, csr, answered, is, err) }()
		}
		if approved, err = i.approve(ctx, csr, s, now); err != nil {
			return nil, foreign, err
		}
	}
	if len(csr.Status.Certificate) == 0 {
		return i.waiting(csr, approved, now), foreign, nil
	}
	return issued(csr), foreign, nil
}

// findOrCreate is Ensure's first step: the request of s (with the foreign ones found), or
// a new one; before a request is created or while it is pending, check may refuse (a
// non-nil Issuance) or fail. A failed Find returns no foreign names.
func (i *Issuer) findOrCreate(ctx context.Context, s Subject, check func(context.Context) (*Issuance, error)) (*certificatesv1.CertificateSigningRequest, []string, *Issuance, error) {
	csr, foreign, err := i.Find(ctx, s)
	if err != nil {
		return nil, nil, nil, err
	}
	if csr == nil || Pending(csr) {
		if refusal, checkErr := check(ctx); refusal != nil || checkErr != nil {
			return nil, foreign, refusal, checkErr
		}
	}
	if csr == nil {
		if csr, err = i.create(ctx, s); err != nil {
			return nil, foreign, nil, err
		}
	}
	return csr, foreign, nil, nil
}

// approve approves csr for s at now, and returns its approval condition.
func (i *Issuer) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, s Subject, now time.Time) (*certificatesv1.CertificateSigningRequestCondition, error) {
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: s.Reason, Message: s.Message, LastUpdateTime: metav1.NewTime(now),
	})
	if err := i.Client.SubResource("approval").Update(ctx, csr); err != nil {
		return nil, fmt.Errorf("approving CertificateSigningRequest %s: %w", csr.Name, err)
	}
	return &csr.Status.Conditions[len(csr.Status.Conditions)-1], nil
}

// afterApproval is what Ensure returns once it approved csr itself, with the signer
// followed: an issuance still pending (is, returned with err) waits for the signer's
// answer; any other is returned as it is.
func (i *Issuer) afterApproval(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, answered <-chan struct{}, is *Issuance, err error) *Issuance {
	if err == nil && is != nil && is.Cert == nil && is.Reason == authv1beta1.ReasonCertificatePending {
		return i.awaitSigner(ctx, csr, answered, is)
	}
	return is
}

// issued is the issuance of a request that holds its certificate: the certificate, or
// why it cannot be read.
func issued(csr *certificatesv1.CertificateSigningRequest) *Issuance {
	cert, err := authn.ParseCertificate(csr.Status.Certificate)
	if err != nil {
		return &Issuance{Reason: authv1beta1.ReasonIssuedCertificateBroken, Message: fmt.Sprintf("CertificateSigningRequest %s: %v", csr.Name, err)}
	}
	return &Issuance{Cert: cert, PEM: csr.Status.Certificate}
}

// awaitSigner waits up to SignerWait for the signer to answer approved, the request this
// call approved, and returns the certificate the cache then holds for that very object
// (same UID), or pending as it was.
func (i *Issuer) awaitSigner(ctx context.Context, approved *certificatesv1.CertificateSigningRequest, answered <-chan struct{}, pending *Issuance) *Issuance {
	d := i.SignerWait
	if d == 0 {
		d = DefaultSignerWait
	}
	wait(ctx, answered, d)
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := i.Client.Get(ctx, client.ObjectKey{Name: approved.Name}, csr); err != nil || csr.UID != approved.UID || len(csr.Status.Certificate) == 0 {
		return pending
	}
	return issued(csr)
}

func (i *Issuer) waiting(csr *certificatesv1.CertificateSigningRequest, approved *certificatesv1.CertificateSigningRequestCondition, now time.Time) *Issuance {
	since := approved.LastUpdateTime.Time
	if since.IsZero() {
		since = csr.CreationTimestamp.Time
	}
	waited := now.Sub(since)
	if waited > i.CSRTimeout {
		return &Issuance{Reason: authv1beta1.ReasonApprovedNotIssued, RequeueAfter: i.CSRTimeout, Message: fmt.Sprintf(
			"CertificateSigningRequest %s was approved %s ago but no certificate was issued: does this cluster run a signer for %s? (some managed offerings do not)",
			csr.Name, waited.Round(time.Second), certificatesv1.KubeAPIServerClientSignerName)}
	}
	return &Issuance{Reason: authv1beta1.ReasonCertificatePending, RequeueAfter: i.CSRTimeout - waited,
		Message: fmt.Sprintf("waiting for the signer to issue CertificateSigningRequest %s", csr.Name)}
}

// create submits s's accepted request under a name the API server makes unique
// (generateName): nobody can create it ahead of the manager.
func (i *Issuer) create(ctx context.Context, s Subject) (*certificatesv1.CertificateSigningRequest, error) {
	o := s.Owner
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "liqo-" + s.RemoteID + "-",
			Labels: map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.TenantUIDLabel: string(o.GetUID()),
				wire.RemoteClusterIDLabel: s.RemoteID},
			Annotations: map[string]string{s.Annotation: o.GetNamespace() + "/" + o.GetName(), wire.ReplacesAnnotation: s.CurrentSerial},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           s.Request,
			SignerName:        certificatesv1.KubeAPIServerClientSignerName,
			ExpirationSeconds: ptr.To(int32(i.Lifetime / time.Second)),
			Usages:            Usages(),
		},
	}
	if err := i.Client.Create(ctx, csr); err != nil {
		return nil, fmt.Errorf("creating a CertificateSigningRequest for %s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
	i.created.Store(o.GetUID(), csr.Name)
	if !i.Own(csr, s) {
		// The API server recorded another requester than the manager's identity (it was
		// read at start): never approve it.
		return nil, fmt.Errorf("CertificateSigningRequest %s was recorded as requested by %q, not by this manager (%q): it is left unapproved",
			csr.Name, csr.Spec.Username, i.Self.Username)
	}
	return csr, nil
}

// Forget drops what the issuer remembers of owner uid (it is gone).
func (i *Issuer) Forget(uid types.UID) { i.created.Delete(uid) }

// DeleteCSRs removes the CertificateSigningRequests this manager made for the owner uid,
// except a pending one when keepPending is set (a renewal may be waiting for it). CSRs
// somebody else made are never touched. reader is the cache, or the API server where a
// CSR created a moment ago must be found.
func (i *Issuer) DeleteCSRs(ctx context.Context, reader client.Reader, uid types.UID, keepPending bool) error {
	var list certificatesv1.CertificateSigningRequestList
	if err := reader.List(ctx, &list, client.MatchingLabels{wire.TenantUIDLabel: string(uid)}); err != nil {
		return err
	}
	now := time.Now()
	i.forgetDeleted(now)
	for k := range list.Items {
		csr := &list.Items[k]
		if !i.RequestedBySelf(csr) || (keepPending && Pending(csr)) {
			continue
		}
		if err := i.deleteOnce(ctx, csr, now); err != nil {
			return err
		}
	}
	return nil
}

// ownerIndex is the name of the cache index IndexByOwner registers for annotation.
func ownerIndex(annotation string) string { return "liqo-auth.csr-owner." + annotation }

// IndexByOwner registers a cache index of this project's CertificateSigningRequests by the
// owner ("namespace/name") their annotation names, which DeleteLeftovers reads.
func IndexByOwner(ctx context.Context, fi client.FieldIndexer, annotation string) error {
	if err := fi.IndexField(ctx, &certificatesv1.CertificateSigningRequest{}, ownerIndex(annotation), func(o client.Object) []string {
		if o.GetLabels()[wire.ManagedByLabel] != wire.ManagedByValue {
			return nil
		}
		if key, ok := o.GetAnnotations()[annotation]; ok {
			return []string{key}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing the certificate requests by %s: %w", annotation, err)
	}
	return nil
}

// DeleteLeftovers deletes the CertificateSigningRequests this manager made for an owner
// named key (by annotation, indexed by IndexByOwner) other than current, the one that
// holds the name now ("" when none does): an owner deleted, and perhaps made again under
// its name, after its request was made, so that no finalizer took the request back. They
// are found in the cache. The cache may lag: live reads the UID of the owner that holds
// the name on the API server ("" when none does), and nothing made for that one is
// touched. live is called only when there is something to delete, so that the reconciles
// of an owner with no leftovers ask the API server nothing.
func (i *Issuer) DeleteLeftovers(ctx context.Context, annotation string, key types.NamespacedName, current types.UID, live func(context.Context) (types.UID, error)) error {
	var list certificatesv1.CertificateSigningRequestList
	if err := i.Client.List(ctx, &list, client.MatchingFields{ownerIndex(annotation): key.String()}); err != nil {
		return err
	}
	now := time.Now()
	i.forgetDeleted(now)
	var left []*certificatesv1.CertificateSigningRequest
	for k := range list.Items {
		csr := &list.Items[k]
		if _, done := i.deleted.Load(csr.UID); !done && types.UID(csr.Labels[wire.TenantUIDLabel]) != current && i.RequestedBySelf(csr) {
			left = append(left, csr)
		}
	}
	if len(left) == 0 {
		return nil
	}
	holder, err := live(ctx)
	if err != nil {
		return err
	}
	for _, csr := range left {
		owner := types.UID(csr.Labels[wire.TenantUIDLabel])
		if owner == holder {
			continue
		}
		if err := i.deleteOnce(ctx, csr, now); err != nil {
			return err
		}
		i.Forget(owner)
	}
	return nil
}

// LiveUID is a DeleteLeftovers live: the UID of the object of kind gvk named key, read
// through reader (the API server), or "" when there is none.
func LiveUID(reader client.Reader, gvk schema.GroupVersionKind, key types.NamespacedName) func(context.Context) (types.UID, error) {
	return func(ctx context.Context) (types.UID, error) {
		o := &metav1.PartialObjectMetadata{}
		o.SetGroupVersionKind(gvk)
		if err := reader.Get(ctx, key, o); err != nil {
			if apierrors.IsNotFound(err) {
				return "", nil
			}
			return "", err
		}
		return o.UID, nil
	}
}

// deleteOnce deletes csr, unless this process deleted it a moment ago (the cache may not
// have seen that yet), and remembers that it did.
func (i *Issuer) deleteOnce(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, now time.Time) error {
	if _, done := i.deleted.Load(csr.UID); done {
		return nil
	}
	if err := i.Client.Delete(ctx, csr, client.Preconditions{UID: &csr.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting CertificateSigningRequest %s: %w", csr.Name, err)
	}
	i.deleted.Store(csr.UID, now)
	return nil
}

// CertificateInfo describes an issued certificate and when to renew it: after two thirds
// of its lifetime, or renewBefore its expiry when set.
func CertificateInfo(cert *x509.Certificate, renewBefore time.Duration) *authv1beta1.CertificateInfo {
	renew := cert.NotAfter.Add(-cert.NotAfter.Sub(cert.NotBefore) / 3)
	if renewBefore > 0 {
		renew = cert.NotAfter.Add(-renewBefore)
	}
	// To the second, as a status stores it: the description read back equals the one made.
	renew = renew.Truncate(time.Second)
	return &authv1beta1.CertificateInfo{
		SerialNumber: cert.SerialNumber.Text(16),
		NotBefore:    ptr.To(metav1.NewTime(cert.NotBefore)),
		NotAfter:     ptr.To(metav1.NewTime(cert.NotAfter)),
		RenewAfter:   ptr.To(metav1.NewTime(renew)),
	}
}
