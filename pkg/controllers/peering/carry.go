package peering

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/status"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// peer decides where the Peering stands and, when the bootstrap credential passes every
// check, runs the handshake. Its error is one to retry with backoff (reading this
// cluster); what the provider answers is a verdict.
func (r *Reconciler) peer(ctx context.Context, in *input, rec events.EventRecorder) (*verdict, error) {
	p := in.peering
	if in.owned != nil {
		p.Status.ProviderClusterID = authv1beta1.ClusterID(in.owned.RemoteID)
		p.Status.TenantNamespace = in.owned.Namespace
	}
	if in.identity != nil && in.ranHandshake() {
		if err := r.pinLegacy(ctx, in, rec); err != nil {
			return nil, err
		}
		describeIdentity(p, in.identity)
		if v := peeredVerdict(in); v.state == authv1beta1.PeeringPeered {
			return v, nil
		}
	}
	if v := firstFailure(in, bootstrapChecks()); v != nil {
		if in.identity != nil && in.ranHandshake() && v.reason == authv1beta1.ReasonBootstrapConsumed {
			// Peered once, and the credential is spent: the Identity says why it is not
			// ready (drained, expired), not the credential.
			return peeredVerdict(in), nil
		}
		return v, nil
	}
	p.Status.Bootstrap = &authv1beta1.PeeringBootstrap{User: in.cert.Subject.CommonName, Serial: in.cert.SerialNumber.Text(16), NotAfter: timeOf(in.cert.NotAfter)}
	return r.handshake(ctx, in, rec)
}

// handshake runs liqoctl authenticate's steps with the bootstrap credential, within one
// attempt's time, and records the credential as used once the Identity is ready.
func (r *Reconciler) handshake(ctx context.Context, in *input, rec events.EventRecorder) (*verdict, error) {
	p := in.peering
	ctx, cancel := context.WithTimeout(ctx, r.AttemptTimeout)
	defer cancel()
	progress := &steps{rec: r.Recorder, peering: p}
	defer progress.flush()
	c, err := r.Consumer(progress.side(handshake.Local))
	if err != nil {
		return nil, err
	}
	pr, err := r.Dial(in.kubeconfig, progress.side(handshake.Remote))
	if err != nil {
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialInvalid, message: err.Error()}, nil
	}
	pr.Namespace = p.Spec.ProviderNamespace
	if pr.Namespace == "" {
		pr.Namespace = wire.DefaultLiqoNamespace
	}
	pair := &handshake.Pair{Consumer: c, Provider: pr, Now: r.Now}
	if identifyErr := pair.Identify(ctx); identifyErr != nil {
		return classify(identifyErr, pr.ClusterID), nil
	}
	if v := r.claim(ctx, in, pair); v != nil {
		return v, nil
	}
	rec.Eventf(p, nil, "Normal", authv1beta1.ReasonPeeringAuthenticating, "Peer", "running the handshake with cluster %q as peering user %s", pr.ClusterID, in.cert.Subject.CommonName)
	id, err := r.Steps.Authenticate(ctx, pair)
	if err != nil {
		return classify(err, pr.ClusterID), nil
	}
	used := cluster.ConsumedBootstrap{User: in.cert.Subject.CommonName, Serial: in.cert.SerialNumber.Text(16), NotAfter: in.cert.NotAfter, Peering: string(p.UID)}
	if err := r.updateRecord(ctx, pr.ClusterID, func(rec *cluster.TenantRecord) { rec.Consume(used, in.now) }); err != nil {
		return nil, err
	}
	in.identity = id
	describeIdentity(p, id)
	r.retire(ctx, p, pr, used.Serial, rec)
	in.retireTried = true
	// afterPeered reads the record this Peering owns now (claimed above), as retire left it.
	owned, readErr := cluster.GetTenantRecord(ctx, r.APIReader, r.LiqoNamespace, pr.ClusterID)
	if readErr != nil {
		return nil, readErr
	}
	in.owned = owned
	return peeredVerdict(in), nil
}

// pinLegacy pins, in the record of a peering this Peering made before the consumer pinned
// its tenant namespace on the provider and its proxy (helper-44's F2: the Peering stops
// once peered, so no handshake of its own ever pins them), the only ones its handshake can
// have used: the protocol's tenant namespace, liqo-tenant-<this cluster>, the one a
// peering user's rights reach (access.PeeringUserTenantRules), and no proxy (a Peering
// declares none). Unpinned, the consumer's slice controller and a slice's deletion would
// take an Identity writer's spec.namespace; pinned, the identity controller refuses an
// Identity that names another (TenantNamespaceNotPinned), which only such a writer can
// have done. It is a one-time migration: a record a handshake pinned, or whose pins its
// administrator forgot, at least once (PinnedOnce) is never pinned here, nor again.
func (r *Reconciler) pinLegacy(ctx context.Context, in *input, rec events.EventRecorder) error {
	if in.owned.PinnedOnce {
		return nil
	}
	ns := wire.TenantNamespaceName(r.ClusterID)
	var pinned []string
	err := r.updateRecord(ctx, in.owned.RemoteID, func(tr *cluster.TenantRecord) {
		pinned = nil
		if tr.PinnedOnce {
			return
		}
		guessed := tr.ProviderTenantNamespace == ""
		if guessed {
			tr.ProviderTenantNamespace = ns
			pinned = append(pinned, "tenant namespace "+ns)
		}
		if tr.ProxyURL == nil {
			tr.ProxyURL = new(string)
			pinned = append(pinned, "no proxy")
		}
		// Marked as the manager's guess only when it chose the namespace: one a handshake
		// pinned (a record whose proxy pin alone was removed by hand) stays the
		// handshake's word, which proofs take.
		tr.PinnedOnce, tr.PinnedByManager = true, tr.PinnedByManager || guessed
		in.owned.ProviderTenantNamespace, in.owned.ProxyURL, in.owned.PinnedOnce = tr.ProviderTenantNamespace, tr.ProxyURL, true
	})
	if err != nil {
		return err
	}
	if len(pinned) > 0 {
		rec.Eventf(in.peering, nil, "Normal", authv1beta1.ReasonPeeringPinned, "Pin",
			"the peering with cluster %q, made before this cluster pinned its way there, is pinned to what its handshake used: %s; an Identity of that cluster naming others is refused",
			in.owned.RemoteID, strings.Join(pinned, " and "))
	}
	return nil
}

// claim makes this Peering the owner of the peering with the provider pair names, in the
// consumer's tenant record, before anything is written on either side: a deleted Peering
// leaves the provider its record names. A provider another live Peering owns is refused.
func (r *Reconciler) claim(ctx context.Context, in *input, pair *handshake.Pair) *verdict {
	p, providerID := in.peering, pair.Provider.ClusterID
	if pin := string(p.Spec.ProviderClusterID); pin != "" && pin != providerID {
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonProviderMismatch,
			message: fmt.Sprintf("the bootstrap credential reaches cluster %q, and spec.providerClusterID pins %q: nothing was written there; check which provider the peering user comes from", providerID, pin)}
	}
	var owner, peered string
	err := r.updateRecord(ctx, providerID, func(rec *cluster.TenantRecord) {
		if rec.Peering == nil {
			rec.Peering = &cluster.RecordedPeering{}
		}
		if rec.Peering.UID == string(p.UID) {
			return
		}
		if rec.Peering.UID != "" && r.peeringExists(ctx, rec.Peering.UID) {
			owner = rec.Peering.Name
			return
		}
		// A peering made otherwise (liqoctl authenticate) is not this Peering's to own:
		// deleting the Peering would leave it, and a provider that presents another's
		// cluster ID would have the consumer leave that other one.
		if peered = r.existingIdentity(ctx, rec); peered != "" {
			return
		}
		rec.Peering.Name, rec.Peering.UID = p.Name, string(p.UID)
	})
	switch {
	case err == nil && peered != "":
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonProviderAlreadyPeered,
			message: fmt.Sprintf("this cluster already peers with cluster %q (Identity %s), not through this Peering: a Peering owns only the peering it makes; to declare it, leave first (liqoctl unauthenticate --remote-cluster-id %s --leave), and the Peering peers again by itself", providerID, peered, providerID)}
	case err != nil:
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonHandshakeFailed, requeue: providerRetry,
			message: fmt.Sprintf("recording the peering with %q in this cluster's tenant record: %v", providerID, err)}
	case owner != "":
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonProviderPeeredElsewhere,
			message: fmt.Sprintf("Peering %s/%s already peers with cluster %q: delete one of the two", p.Namespace, owner, providerID)}
	}
	p.Status.ProviderClusterID = authv1beta1.ClusterID(providerID)
	if pin := p.Spec.ProviderCAFingerprint; pin != "" {
		if err := handshake.PinCAFingerprint(ctx, pair.Consumer, providerID, pin, "spec.providerCAFingerprint of Peering "+p.Name+" gives "+pin); err != nil {
			return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonProviderCAMismatch, message: err.Error()}
		}
	}
	return nil
}

// existingIdentity names the control-plane Identity this cluster holds of the provider
// whose record is rec ("" when none).
func (r *Reconciler) existingIdentity(ctx context.Context, rec *cluster.TenantRecord) string {
	ns := rec.Namespace
	if ns == "" {
		ns = wire.TenantNamespaceName(rec.RemoteID)
	}
	key := client.ObjectKey{Namespace: ns, Name: wire.IdentityName(rec.RemoteID)}
	if err := r.APIReader.Get(ctx, key, &authv1beta1.Identity{}); err != nil {
		return ""
	}
	return key.String()
}

// peeringExists says whether a Peering with uid is still in the Liqo namespace.
func (r *Reconciler) peeringExists(ctx context.Context, uid string) bool {
	var list authv1beta1.PeeringList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.LiqoNamespace)); err != nil {
		return true // unknown: the claim is refused, and tried again
	}
	for _, p := range list.Items {
		if string(p.UID) == uid {
			return true
		}
	}
	return false
}

// updateRecord changes the consumer's tenant record of providerID (creating it).
func (r *Reconciler) updateRecord(ctx context.Context, providerID string, mutate func(*cluster.TenantRecord)) error {
	return cluster.UpdateTenantRecord(ctx, r.Client, r.APIReader, r.LiqoNamespace, providerID, true, func(rec *cluster.TenantRecord) error {
		mutate(rec)
		return nil
	})
}

// classify turns a handshake error into the Peering's verdict: the provider's answer, or
// what is wrong with the credential or the way there.
func classify(err error, providerID string) *verdict {
	var refusal *handshake.PeeringUserRefusal
	switch {
	case errors.Is(err, handshake.ErrApprovalPending):
		return &verdict{state: authv1beta1.PeeringWaitingForApproval, reason: authv1beta1.ReasonPeeringWaitingForApproval, requeue: approvalRecheck,
			message: fmt.Sprintf("cluster %q accepted the handshake and waits for its administrator's approval: %v", providerID, err)}
	case errors.Is(err, handshake.ErrDenied):
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonPeeringDenied, requeue: deniedRecheck, message: err.Error()}
	case errors.As(err, &refusal):
		return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused, message: err.Error()}
	case handshake.Unreachable(err):
		return &verdict{state: authv1beta1.PeeringPending, reason: authv1beta1.ReasonProviderUnreachable, requeue: providerRetry, message: err.Error()}
	}
	return &verdict{state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonHandshakeFailed, requeue: providerRetry, message: err.Error()}
}

// describeIdentity copies into the Peering's status what its Identity says.
func describeIdentity(p *authv1beta1.Peering, id *authv1beta1.Identity) {
	p.Status.TenantNamespace, p.Status.Identity = id.Namespace, id.Name
	p.Status.Certificate = id.Status.Certificate.DeepCopy()
}

// afterPeered retires the bootstrap credential if it was not, and asks for the slices;
// it returns when to come back for them (0: on events only).
func (r *Reconciler) afterPeered(ctx context.Context, in *input, rec events.EventRecorder) time.Duration {
	r.describeBootstrap(ctx, in, rec)
	return r.slices(ctx, in, rec)
}

// describeBootstrap sets the BootstrapRetired condition from the record, retiring a used
// credential the record does not say retired when the Secret still holds it.
func (r *Reconciler) describeBootstrap(ctx context.Context, in *input, rec events.EventRecorder) {
	p := in.peering
	var pending *cluster.ConsumedBootstrap
	retired := 0
	for i, b := range in.owned.Peering.Consumed {
		if b.Peering != string(p.UID) {
			continue
		}
		if b.Retired != nil {
			retired++
			p.Status.Bootstrap = &authv1beta1.PeeringBootstrap{User: b.User, Serial: b.Serial, NotAfter: timeOf(b.NotAfter), Retired: timeOf(*b.Retired)}
		} else {
			pending = &in.owned.Peering.Consumed[i]
		}
	}
	switch {
	case pending != nil:
		if !in.retireTried { // else the condition says how this reconcile's attempt went
			r.retireFromSecret(ctx, in, pending, rec)
		}
	case retired > 0:
		status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionBootstrapRetired, true, authv1beta1.ReasonBootstrapRetired,
			fmt.Sprintf("peering user %s retired itself on the provider, proven: its certificate authorizes nothing there; Secret %s may be deleted", p.Status.Bootstrap.User, p.Spec.BootstrapSecretRef.Name), p.Generation)
	default:
		status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionBootstrapRetired, true, authv1beta1.ReasonBootstrapRetirePending,
			"this Peering's handshake used no bootstrap credential the tenant record knows of: none to retire", p.Generation)
	}
}

// retireFromSecret retires the used credential b with the kubeconfig the Secret holds,
// when it is still that credential.
func (r *Reconciler) retireFromSecret(ctx context.Context, in *input, b *cluster.ConsumedBootstrap, rec events.EventRecorder) {
	p := in.peering
	if in.secret == nil {
		// Stage two was not loaded: the Identity is ready.
		_ = r.loadBootstrap(ctx, in, nil)
	}
	if in.cert == nil || in.cert.SerialNumber.Text(16) != b.Serial {
		status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionBootstrapRetired, false, authv1beta1.ReasonBootstrapNotRetired,
			fmt.Sprintf("peering user %s was used and could not retire itself, and Secret %s no longer holds it: ask the provider's administrator to run liqoctl delete peering-user --consumer-cluster-id %s",
				b.User, p.Spec.BootstrapSecretRef.Name, r.ClusterID), p.Generation)
		return
	}
	progress := &steps{rec: r.Recorder, peering: p}
	defer progress.flush()
	pr, err := r.Dial(in.kubeconfig, progress.side(handshake.Remote))
	if err != nil {
		status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionBootstrapRetired, false, authv1beta1.ReasonBootstrapNotRetired, err.Error(), p.Generation)
		return
	}
	pr.ClusterID = in.owned.RemoteID
	r.retire(ctx, p, pr, b.Serial, rec)
}

// retire has the peering user of pr retire itself and records it; the condition says how
// it went.
func (r *Reconciler) retire(ctx context.Context, p *authv1beta1.Peering, pr *handshake.Side, serial string, rec events.EventRecorder) {
	err := r.Steps.Retire(ctx, pr)
	if err == nil {
		now := r.now()
		err = r.updateRecord(ctx, pr.ClusterID, func(tr *cluster.TenantRecord) {
			if b := tr.ConsumedBootstrap(serial); b != nil {
				b.Retired = &now
			}
		})
		if p.Status.Bootstrap != nil {
			p.Status.Bootstrap.Retired = timeOf(now)
		}
	}
	if err != nil {
		if status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionBootstrapRetired, false, authv1beta1.ReasonBootstrapNotRetired,
			fmt.Sprintf("the peering user could not retire itself (tried again at the next reconcile): %v", err), p.Generation) {
			rec.Eventf(p, nil, "Warning", authv1beta1.ReasonBootstrapNotRetired, "Retire", "%v", err)
		}
		return
	}
	if status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionBootstrapRetired, true, authv1beta1.ReasonBootstrapRetired,
		fmt.Sprintf("peering user retired itself on cluster %q, proven: its certificate authorizes nothing there; Secret %s may be deleted", pr.ClusterID, p.Spec.BootstrapSecretRef.Name), p.Generation) {
		rec.Eventf(p, nil, "Normal", authv1beta1.ReasonBootstrapRetired, "Retire", "the bootstrap peering user retired itself on cluster %q, proven", pr.ClusterID)
	}
}

// leave carries out a deleted Peering: the consumer leaves the provider its record names,
// with its own identity, and the finalizer goes once that is proven.
func (r *Reconciler) leave(ctx context.Context, p *authv1beta1.Peering, rec events.EventRecorder) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		return ctrl.Result{}, nil
	}
	in, err := r.load(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	if in.owned != nil {
		// One status write per attempt, and only when it failed: a Peering that leaves at
		// once is gone before anyone reads its status, and each write would wake it again.
		var err error
		if in.identity == nil && in.ranHandshake() {
			// This Peering's handshake made the peering (the record says so), and its
			// Identity is gone: Leave finds nothing to leave with, which is no proof that
			// the provider holds nothing. An Identity writer must not end a peering's
			// revocation by deleting the one credential that could prove it.
			err = fmt.Errorf("%w: the Identity %s of provider %q is gone from this cluster, so this cluster can neither leave by itself nor prove it: its provider's administrator runs liqoctl unauthenticate --remote-cluster-id %s there; then remove the finalizer %s from this Peering",
				handshake.ErrCannotLeave, wire.IdentityName(in.owned.RemoteID), in.owned.RemoteID, r.ClusterID, Finalizer)
		} else {
			err = r.leaveProvider(ctx, p, in.owned.RemoteID)
		}
		if err != nil {
			orig := p.DeepCopy()
			r.setReady(p, &verdict{state: authv1beta1.PeeringLeaving, reason: authv1beta1.ReasonPeeringLeaveFailed,
				message: fmt.Sprintf("leaving cluster %q with this cluster's own identity (tried again in %s): %v", in.owned.RemoteID, leaveRetry, err)}, rec)
			if _, saveErr := status.SaveStatus(ctx, r.Client, p, statusChanged(orig, p)); saveErr != nil {
				return ctrl.Result{}, saveErr
			}
			return ctrl.Result{RequeueAfter: leaveRetry}, nil
		}
	}
	controllerutil.RemoveFinalizer(p, Finalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, p))
}

// leaveProvider deletes the slices the Peering asked for, leaves providerID and forgets
// that this Peering owned the peering.
func (r *Reconciler) leaveProvider(ctx context.Context, p *authv1beta1.Peering, providerID string) error {
	progress := &steps{rec: r.Recorder, peering: p}
	defer progress.flush()
	c, err := r.Consumer(progress.side(handshake.Local))
	if err != nil {
		return err
	}
	if err := r.Steps.Leave(ctx, c, providerID, r.now()); err != nil {
		return err
	}
	return r.updateRecord(ctx, providerID, func(rec *cluster.TenantRecord) {
		if rec.Peering != nil && rec.Peering.UID == string(p.UID) {
			rec.Peering.Name, rec.Peering.UID = "", ""
		}
	})
}
