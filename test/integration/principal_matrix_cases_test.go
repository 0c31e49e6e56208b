package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// principalMatrix are the cases: one or more per writer of each kind in
// access.ManagerWatched and access.CommandReads. A name starting with "consumer:" runs once
// the consumer's manager runs.
func principalMatrix() []matrixCase {
	return []matrixCase{
		// Namespaces.
		{resource: "namespaces", principal: access.NamespaceCreator, name: "provider: a look-alike tenant namespace, and another claiming the consumer",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				m.ownTenantNS(t, m.p)
				m.own(t, m.p, ownNS, nil)
				claim := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "matrix-claims-consumer",
					Labels: map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: m.c.id}}}
				f.create(m.pNSCreator, m.p.client, claim)
			}},
		{resource: "namespaces", principal: access.NamespaceCreator, name: "consumer: a look-alike tenant namespace, and another claiming the provider",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				m.ownTenantNS(t, m.c)
				m.own(t, m.c, ownNS, nil)
				claim := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "matrix-claims-provider",
					Labels: map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: m.p.id}}}
				f.create(m.cNSCreator, m.c.client, claim)
			}},

		// Secrets.
		{resource: "secrets", principal: access.NamespaceCreator, name: "provider: nonces in a look-alike tenant namespace and elsewhere",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.p)
				f.create(w, m.p.client, secret(ns, wire.NonceSecretName, map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: forgedID}, nonceData(t)))
				f.create(m.own(t, m.p, ownNS, nil), m.p.client, secret(ownNS, wire.NonceSecretName, map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: m.c.id}, nonceData(t)))
			}},
		{resource: "secrets", principal: access.NamespaceCreator, name: "consumer: nonces to sign in a look-alike tenant namespace and elsewhere",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.c)
				f.create(w, m.c.client, secret(ns, wire.SignedNonceSecretName, map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: forgedID}, nonceData(t)))
				f.create(m.own(t, m.c, ownNS, nil), m.c.client, secret(ownNS, wire.SignedNonceSecretName, map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: m.p.id}, nonceData(t)))
			}},
		{resource: "secrets", principal: access.SecretWriter, name: "provider: a second Secret labelled as the consumer's nonce",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				f.create(m.secretWriter, m.p.client, secret(m.pTN, "matrix-nonce", map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: m.c.id}, nonceData(t)))
			}},
		// The cache keeps kubeconfig-* Secrets of a tenant namespace whole (not stripped).
		{resource: "secrets", principal: access.SecretWriter, name: "provider: a kubeconfig-named Secret labelled as the consumer's nonce",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				f.create(m.secretWriter, m.p.client, secret(m.pTN, wire.KubeconfigSecretName("matrix"), map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: m.c.id}, nonceData(t)))
			}},
		{resource: "secrets", principal: access.SecretWriter, name: "provider: the cache's stripped annotation on an unused nonce",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				s := &corev1.Secret{ObjectMeta: metaOf(m.laterTN, wire.NonceSecretName)}
				f.mutate(m.laterSecret, m.p.client, s, false, func() { setAnnotation(s, wire.StrippedAnnotation, "true") })
			}},
		{resource: "secrets", principal: access.SecretWriter, name: "provider: the consumed nonce's annotations",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				s := &corev1.Secret{ObjectMeta: metaOf(m.pTN, wire.NonceSecretName)}
				f.mutate(m.secretWriter, m.p.client, s, false, func() {
					delete(s.Annotations, wire.NonceConsumedAtAnnotation)
					setAnnotation(s, wire.NonceIssuedAtAnnotation, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
				})
			}},
		{resource: "secrets", principal: access.SecretWriter, name: "provider: the consumed nonce's labels",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				s := &corev1.Secret{ObjectMeta: metaOf(m.pTN, wire.NonceSecretName)}
				f.mutate(m.secretWriter, m.p.client, s, false, func() { s.Labels[wire.RemoteClusterIDLabel] = laterID })
			}},
		{resource: "secrets", principal: access.SecretWriter, name: "provider: the consumed nonce's value",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				s := &corev1.Secret{ObjectMeta: metaOf(m.pTN, wire.NonceSecretName)}
				f.mutate(m.secretWriter, m.p.client, s, false, func() { s.Data = nonceData(t) })
			}},
		{resource: "secrets", principal: access.SecretWriter, name: "consumer: the kubeconfig Secret's data",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				s := &corev1.Secret{ObjectMeta: metaOf(m.cTN, wire.KubeconfigSecretName(wire.IdentityName(m.p.id)))}
				f.mutate(m.cSecretWriter, m.c.client, s, false, func() { s.Data[wire.KubeconfigField] = []byte("apiVersion: v1\nkind: Config\n") })
			}},
		{resource: "secrets", principal: access.SecretWriter, name: "consumer: the kubeconfig Secret's labels and annotations",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				s := &corev1.Secret{ObjectMeta: metaOf(m.cTN, wire.KubeconfigSecretName(wire.IdentityName(m.p.id)))}
				f.mutate(m.cSecretWriter, m.c.client, s, false, func() {
					setAnnotation(s, wire.StrippedAnnotation, "true")
					setLabel(s, wire.RemoteClusterIDLabel, forgedID)
				})
			}},
		{resource: "secrets", principal: access.PeeringUser, name: "provider: the consumer's nonce, as its peering user",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				s := &corev1.Secret{ObjectMeta: metaOf(m.pTN, wire.NonceSecretName)}
				f.mutate(m.peeringUser, m.p.client, s, false, func() {
					s.Data = nonceData(t)
					delete(s.Annotations, wire.NonceConsumedAtAnnotation)
				})
			}},

		// Tenant records.
		{resource: "configmaps", principal: access.NamespaceCreator, name: "provider: tenant records outside the Liqo namespace",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				var real corev1.ConfigMap
				require.NoError(t, m.p.client.Get(context.Background(), client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(m.c.id)}, &real))
				w := m.own(t, m.p, ownNS, nil)
				for _, id := range []string{m.c.id, forgedID} {
					f.create(w, m.p.client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ownNS, Name: wire.TenantRecordName(id),
						Labels: map[string]string{wire.TenantRecordLabel: "true"}}, Data: real.Data})
				}
			}},

		// Tenants.
		{resource: "tenants", principal: access.NamespaceCreator, name: "provider: Tenants in a look-alike tenant namespace and elsewhere",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.p)
				a := newAttacker(t, forgedID)
				nonce := nonceData(t)[wire.NonceField]
				f.create(w, m.p.client, a.honestTenant(t, ns, string(nonce)))
				f.create(m.own(t, m.p, ownNS, nil), m.p.client, m.replayedTenant(t, ownNS))
			}},
		{resource: "tenants", principal: access.TenantWriter, name: "provider: the accepted Tenant's labels and annotations", disruptive: true, lossOnly: true,
			forge: func(t *testing.T, m *matrix, f *forgery) {
				tn := &authv1beta1.Tenant{ObjectMeta: metaOf(m.pTN, m.c.id)}
				f.mutate(m.tenantWriter, m.p.client, tn, false, func() {
					setLabel(tn, wire.RemoteClusterIDLabel, laterID)
					setAnnotation(tn, wire.GrantedResourcesAnnotation, `{"cpu":"1000"}`)
					setAnnotation(tn, wire.ReplacesAnnotation, "00")
				})
			}},
		{resource: "tenants", principal: access.TenantWriter, name: "provider: the accepted Tenant's key, request and signature", lossOnly: true, disruptive: true,
			forge: func(t *testing.T, m *matrix, f *forgery) {
				a := newAttacker(t, m.c.id)
				tn := &authv1beta1.Tenant{ObjectMeta: metaOf(m.pTN, m.c.id)}
				f.mutate(m.tenantWriter, m.p.client, tn, false, func() {
					tn.Spec.PublicKey, tn.Spec.CSR, tn.Spec.Signature = a.pubPEM(t), a.csr(t), a.sign(t, string(nonceData(t)[wire.NonceField]))
				})
			}},
		{resource: "tenants", principal: access.TenantWriter, name: "provider: a Tenant of another cluster in the tenant namespace",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				f.create(m.tenantWriter, m.p.client, newAttacker(t, laterID).honestTenant(t, m.pTN, string(nonceData(t)[wire.NonceField])))
			}},
		{resource: "tenants", principal: access.PeeringUser, name: "provider: the Tenant's metadata and state, as its peering user", disruptive: true, lossOnly: true,
			forge: func(t *testing.T, m *matrix, f *forgery) {
				tn := &authv1beta1.Tenant{ObjectMeta: metaOf(m.pTN, m.c.id)}
				f.mutate(m.peeringUser, m.p.client, tn, false, func() {
					setLabel(tn, wire.RemoteClusterIDLabel, laterID)
					setAnnotation(tn, wire.TenantAnnotation, m.laterTN+"/"+laterID)
					tn.Spec.TenantCondition = authv1beta1.TenantConditionActive
				})
			}},
		{resource: "tenants", principal: access.PeeringUser, name: "provider: a Tenant of another cluster, as a peering user",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				f.create(m.peeringUser, m.p.client, newAttacker(t, laterID).honestTenant(t, m.pTN, string(nonceData(t)[wire.NonceField])))
			}},
		{resource: "tenants", principal: access.TheTenant, name: "provider: deletes its own Tenant (leaving), and no other", disruptive: true, lossOnly: true,
			forge: func(t *testing.T, m *matrix, f *forgery) {
				ctx := context.Background()
				for _, other := range []client.ObjectKey{{Namespace: m.pTN, Name: laterID}, {Namespace: m.laterTN, Name: laterID}, {Namespace: m.pTN, Name: forgedID}} {
					err := m.theTenant.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metaOf(other.Namespace, other.Name)})
					require.True(t, apierrors.IsForbidden(err), "the tenant deletes Tenant %s: %v", other, err)
				}
				tn := &authv1beta1.Tenant{ObjectMeta: metaOf(m.tenantKey.Namespace, m.tenantKey.Name)}
				require.NoError(t, m.p.client.Get(ctx, m.tenantKey, tn))
				f.changed[string(tn.UID)] = true
				require.NoError(t, m.theTenant.Delete(ctx, tn))
				eventually(t, 30*time.Second, "its Tenant gone", func(ctx context.Context) (bool, error) {
					err := m.p.client.Get(ctx, m.tenantKey, &authv1beta1.Tenant{})
					return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
				})
				// Leaving is undone as a consumer comes back: a new handshake, and its slice
				// asked again (the Tenant's deletion took the slice's copy with it).
				f.undo = append(f.undo, func() {
					mustCLI(t, pairArgs("authenticate", m.c, m.p)...)
					var back authv1beta1.Tenant
					require.NoError(t, m.p.client.Get(context.Background(), m.tenantKey, &back))
					m.tenantUID, m.tenantCSR = string(back.UID), back.Spec.CSR
					mustCLI(t, "delete", "resourceslice", sliceName, "--kubeconfig", m.c.cp.Kubeconfig, "--remote-cluster-id", m.p.id)
					mustCLI(t, "create", "resourceslice", sliceName, "--kubeconfig", m.c.cp.Kubeconfig, "--remote-cluster-id", m.p.id, "--cpu", "1")
				})
			}},
		{resource: "tenants", principal: access.StatusWriter, name: "provider: the accepted Tenant's acceptance time (peergc)", disruptive: true,
			forge: func(t *testing.T, m *matrix, f *forgery) {
				tn := &authv1beta1.Tenant{ObjectMeta: metaOf(m.pTN, m.c.id)}
				f.mutate(m.statusWriter, m.p.client, tn, true, func() { tn.Status.AcceptedAt = &metav1.Time{Time: time.Now().Add(-25 * time.Hour)} })
			}},
		{resource: "tenants", principal: access.StatusWriter, name: "provider: the accepted Tenant's conditions, certificate and published parameters",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				tn := &authv1beta1.Tenant{ObjectMeta: metaOf(m.pTN, m.c.id)}
				f.mutate(m.statusWriter, m.p.client, tn, true, func() {
					meta.SetStatusCondition(&tn.Status.Conditions, metav1.Condition{Type: authv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Forged", Message: "forged"})
					tn.Status.Certificate = &authv1beta1.CertificateInfo{SerialNumber: "0f", NotAfter: &metav1.Time{Time: time.Now().Add(10 * 365 * 24 * time.Hour).Truncate(time.Second)}}
					tn.Status.AuthParams = &authv1beta1.AuthParams{APIServer: "https://127.0.0.1:9"}
					tn.Status.TenantCondition = authv1beta1.TenantConditionActive
				})
			}},
		{resource: "tenants", principal: access.StatusWriter, name: "provider: an acceptance on a Tenant a namespace creator made in a look-alike tenant namespace",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.p)
				tn := newAttacker(t, forgedID).honestTenant(t, ns, string(nonceData(t)[wire.NonceField]))
				f.create(w, m.p.client, tn)
				f.mutate(m.statusWriter, m.p.client, tn, true, func() {
					tn.Status.AcceptedKeyFingerprint = "sha256:forged"
					tn.Status.AcceptedAt = &metav1.Time{Time: time.Now().Add(-25 * time.Hour)}
					tn.Status.Certificate = &authv1beta1.CertificateInfo{SerialNumber: "0f", NotAfter: &metav1.Time{Time: time.Now().Add(time.Hour).Truncate(time.Second)}}
					meta.SetStatusCondition(&tn.Status.Conditions, metav1.Condition{Type: authv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "forged"})
				})
			}},

		// Renews.
		{resource: "renews", principal: access.TheTenant, name: "provider: Renews for another consumer and for another key, in its tenant namespace",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				other := newAttacker(t, m.c.id)
				f.create(m.theTenant, m.p.client, &authv1beta1.Renew{ObjectMeta: metaOf(m.pTN, "matrix-other"),
					Spec: authv1beta1.RenewSpec{ConsumerClusterID: laterID, IdentityType: authv1beta1.ControlPlaneIdentityType}})
				f.create(m.theTenant, m.p.client, &authv1beta1.Renew{ObjectMeta: metaOf(m.pTN, "matrix-key"),
					Spec: authv1beta1.RenewSpec{ConsumerClusterID: authv1beta1.ClusterID(m.c.id), PublicKey: other.pubPEM(t), CSR: other.csr(t), IdentityType: authv1beta1.ControlPlaneIdentityType}})
			}},
		{resource: "renews", principal: access.NamespaceCreator, name: "provider: Renews in a look-alike tenant namespace and elsewhere",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.p)
				f.create(w, m.p.client, &authv1beta1.Renew{ObjectMeta: metaOf(ns, "matrix-renew"),
					Spec: authv1beta1.RenewSpec{ConsumerClusterID: forgedID, IdentityType: authv1beta1.ControlPlaneIdentityType}})
				f.create(m.own(t, m.p, ownNS, nil), m.p.client, &authv1beta1.Renew{ObjectMeta: metaOf(ownNS, "matrix-renew"),
					Spec: authv1beta1.RenewSpec{ConsumerClusterID: authv1beta1.ClusterID(m.c.id), IdentityType: authv1beta1.ControlPlaneIdentityType}})
			}},
		{resource: "renews", principal: access.StatusWriter, name: "consumer: the answer of a Renew in a look-alike tenant namespace",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.p)
				rn := &authv1beta1.Renew{ObjectMeta: metaOf(ns, "matrix-answered"),
					Spec: authv1beta1.RenewSpec{ConsumerClusterID: forgedID, IdentityType: authv1beta1.ControlPlaneIdentityType}}
				f.create(w, m.p.client, rn)
				f.mutate(m.statusWriter, m.p.client, rn, true, func() {
					rn.Status.AuthParams = &authv1beta1.AuthParams{APIServer: "https://127.0.0.1:9", SignedCRT: []byte("forged")}
				})
			}},

		// ResourceSlices.
		{resource: "resourceslices", principal: access.TheTenant, name: "provider: a slice claiming another consumer, in its tenant namespace",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				a := newAttacker(t, laterID)
				f.create(m.theTenant, m.p.client, providerCopy(m.pTN, "matrix-claim", laterID, a.csr(t)))
			}},
		// spec.resources is the tenant's request, which the provider decides under the
		// tenant's limits (TestResourceSliceLimits): not a forgery.
		{resource: "resourceslices", principal: access.TheTenant, name: "provider: its slice's labels and annotations", lossOnly: true, disruptive: true,
			forge: func(t *testing.T, m *matrix, f *forgery) {
				rs := &authv1beta1.ResourceSlice{ObjectMeta: metaOf(m.pTN, sliceName)}
				f.mutate(m.theTenant, m.p.client, rs, false, func() {
					setLabel(rs, wire.RemoteClusterIDLabel, laterID)
					setAnnotation(rs, wire.GrantedResourcesAnnotation, `{"cpu":"64"}`)
				})
			}},
		{resource: "resourceslices", principal: access.TheTenant, name: "provider: its accepted slice's request, for another key", lossOnly: true, disruptive: true,
			forge: func(t *testing.T, m *matrix, f *forgery) {
				rs := &authv1beta1.ResourceSlice{ObjectMeta: metaOf(m.pTN, sliceName)}
				f.mutate(m.theTenant, m.p.client, rs, false, func() {
					a := newAttacker(t, m.c.id)
					rs.Spec.CSR = sliceCSR(t, a.key, authn.SliceUserName(sliceName, m.c.id), m.c.id)
				})
			}},
		{resource: "resourceslices", principal: access.NamespaceCreator, name: "provider: slices in a look-alike tenant namespace and elsewhere",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.p)
				f.create(w, m.p.client, providerCopy(ns, "matrix-slice", forgedID, newAttacker(t, forgedID).csr(t)))
				f.create(m.own(t, m.p, ownNS, nil), m.p.client, providerCopy(ownNS, "matrix-slice", m.c.id, newAttacker(t, m.c.id).csr(t)))
			}},
		{resource: "resourceslices", principal: access.NamespaceCreator, name: "consumer: slices asking the provider from a look-alike tenant namespace and elsewhere",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.c)
				forged := &site{id: forgedID}
				rs := localSlice(m.c, forged, "matrix-ask", "", "1")
				rs.Namespace = ns
				f.create(w, m.c.client, rs)
				rs = localSlice(m.c, m.p, "matrix-ask", "", "1")
				rs.Namespace = ownNS
				f.create(m.own(t, m.c, ownNS, nil), m.c.client, rs)
			}},
		{resource: "resourceslices", principal: access.SliceWriter, name: "consumer: a slice asking a provider never peered, in the tenant namespace",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				rs := localSlice(m.c, &site{id: forgedID}, "matrix-ask", "", "1")
				rs.Namespace = m.cTN
				f.create(m.cSliceWriter, m.c.client, rs)
			}},
		{resource: "resourceslices", principal: access.SliceWriter, name: "consumer: its slice's labels",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				rs := &authv1beta1.ResourceSlice{ObjectMeta: metaOf(m.cTN, sliceName)}
				f.mutate(m.cSliceWriter, m.c.client, rs, false, func() {
					setLabel(rs, wire.RemoteClusterIDLabel, forgedID)
					setLabel(rs, wire.ReplicationDestinationLabel, forgedID)
				})
			}},
		{resource: "resourceslices", principal: access.StatusWriter, name: "provider: the status of the consumer's slice",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				rs := &authv1beta1.ResourceSlice{ObjectMeta: metaOf(m.pTN, sliceName)}
				f.mutate(m.statusWriter, m.p.client, rs, true, func() {
					rs.Status.Resources = cpu("64")
					if rs.Status.Certificate == nil {
						rs.Status.Certificate = &authv1beta1.CertificateInfo{}
					}
					rs.Status.Certificate.NotAfter = &metav1.Time{Time: time.Now().Add(10 * 365 * 24 * time.Hour).Truncate(time.Second)}
				})
			}},
		{resource: "resourceslices", principal: access.StatusWriter, name: "consumer: the status of its slice",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				rs := &authv1beta1.ResourceSlice{ObjectMeta: metaOf(m.cTN, sliceName)}
				f.mutate(m.cStatusWriter, m.c.client, rs, true, func() {
					rs.Status.Resources = cpu("64")
					if rs.Status.Certificate == nil {
						rs.Status.Certificate = &authv1beta1.CertificateInfo{}
					}
					rs.Status.Certificate.NotAfter = &metav1.Time{Time: time.Now().Add(10 * 365 * 24 * time.Hour).Truncate(time.Second)}
				})
			}},

		// Identities.
		{resource: "identities", principal: access.NamespaceCreator, name: "consumer: Identities in a look-alike tenant namespace and elsewhere",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				var real authv1beta1.Identity
				require.NoError(t, m.c.client.Get(context.Background(), client.ObjectKey{Namespace: m.cTN, Name: wire.IdentityName(m.p.id)}, &real))
				w, ns := m.ownTenantNS(t, m.c)
				f.create(w, m.c.client, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.IdentityName(forgedID), Labels: map[string]string{wire.RemoteClusterIDLabel: forgedID}},
					Spec: authv1beta1.IdentitySpec{ClusterID: forgedID, Type: authv1beta1.ControlPlaneIdentityType, AuthParams: real.Spec.AuthParams}})
				f.create(m.own(t, m.c, ownNS, nil), m.c.client, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: ownNS, Name: wire.IdentityName(m.p.id), Labels: real.Labels},
					Spec: real.Spec})
			}},
		{resource: "identities", principal: access.IdentityWriter, name: "consumer: the Identity's labels and annotations", lossOnly: true,
			forge: func(t *testing.T, m *matrix, f *forgery) {
				id := &authv1beta1.Identity{ObjectMeta: metaOf(m.cTN, wire.IdentityName(m.p.id))}
				f.mutate(m.identityWriter, m.c.client, id, false, func() {
					setLabel(id, wire.RemoteClusterIDLabel, forgedID)
					setAnnotation(id, wire.RemoteTenantNamespaceAnnotation, "kube-system")
				})
			}},
		{resource: "identities", principal: access.IdentityWriter, name: "consumer: the Identity's API server and CA", lossOnly: true,
			forge: func(t *testing.T, m *matrix, f *forgery) {
				id := &authv1beta1.Identity{ObjectMeta: metaOf(m.cTN, wire.IdentityName(m.p.id))}
				f.mutate(m.identityWriter, m.c.client, id, false, func() {
					id.Spec.AuthParams.APIServer = "https://127.0.0.1:9"
					id.Spec.AuthParams.CA = m.c.cp.CA.CertPEM
				})
			}},
		{resource: "identities", principal: access.IdentityWriter, name: "consumer: an Identity of another provider in the tenant namespace",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				var real authv1beta1.Identity
				require.NoError(t, m.c.client.Get(context.Background(), client.ObjectKey{Namespace: m.cTN, Name: wire.IdentityName(m.p.id)}, &real))
				f.create(m.identityWriter, m.c.client, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: m.cTN, Name: wire.IdentityName(forgedID), Labels: map[string]string{wire.RemoteClusterIDLabel: forgedID}},
					Spec: authv1beta1.IdentitySpec{ClusterID: forgedID, Type: authv1beta1.ControlPlaneIdentityType, AuthParams: real.Spec.AuthParams}})
			}},
		{resource: "identities", principal: access.StatusWriter, name: "consumer: the Identity's status",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				id := &authv1beta1.Identity{ObjectMeta: metaOf(m.cTN, wire.IdentityName(m.p.id))}
				f.mutate(m.cStatusWriter, m.c.client, id, true, func() {
					meta.SetStatusCondition(&id.Status.Conditions, metav1.Condition{Type: authv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Forged", Message: "forged"})
					if id.Status.Certificate == nil {
						id.Status.Certificate = &authv1beta1.CertificateInfo{}
					}
					id.Status.Certificate.NotAfter = &metav1.Time{Time: time.Now().Add(10 * 365 * 24 * time.Hour).Truncate(time.Second)}
				})
			}},

		{resource: "peerings", principal: access.StatusWriter, name: "consumer: a Peering's status names the peered provider, Peered, its bootstrap retired",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				// The administrator declares a peering whose Secret is not there yet; the
				// status writer makes its status claim the provider the pair peers with.
				pe := &authv1beta1.Peering{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, "matrix-peering"),
					Spec: authv1beta1.PeeringSpec{BootstrapSecretRef: corev1.LocalObjectReference{Name: "matrix-missing"}}}
				f.create(m.c.client, m.c.client, pe)
				f.mutate(m.cStatusWriter, m.c.client, pe, true, func() {
					pe.Status.State, pe.Status.ProviderClusterID = authv1beta1.PeeringPeered, authv1beta1.ClusterID(m.p.id)
					pe.Status.TenantNamespace, pe.Status.Identity = m.cTN, wire.IdentityName(m.p.id)
					pe.Status.Bootstrap = &authv1beta1.PeeringBootstrap{User: wire.PeeringUserName(m.c.id, "matrix"), Serial: "abcd"}
					meta.SetStatusCondition(&pe.Status.Conditions, metav1.Condition{Type: authv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: authv1beta1.ReasonPeered, Message: "forged"})
				})
			}},

		// RBAC the binding scan and the slice grants read.
		{resource: "rolebindings", principal: access.NamespaceCreator, name: "provider: bindings naming the consumer and liqo.io, in a look-alike tenant namespace and elsewhere",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.p)
				for _, at := range []struct {
					w  client.Client
					ns string
				}{{w, ns}, {m.own(t, m.p, ownNS, nil), ownNS}} {
					f.create(at.w, m.p.client, &rbacv1.Role{ObjectMeta: metaOf(at.ns, "matrix-empty")})
					f.create(at.w, m.p.client, &rbacv1.RoleBinding{ObjectMeta: metaOf(at.ns, wire.ManagerName),
						RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "matrix-empty"},
						Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: m.c.id}, {APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: wire.UserGroup}}})
				}
			}},
		{resource: "clusterrolebindings", principal: access.ClusterRoleBinder, name: "provider: a binding labelled as a peering user's, naming the consumer",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				f.create(m.crbWriter, m.p.client, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "matrix-peering-user",
					Labels:      map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.PeeringUserLabel: wire.PeeringUserName(forgedID, "x"), wire.RemoteClusterIDLabel: forgedID},
					Annotations: map[string]string{wire.PeeringUserExpiresAnnotation: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "matrix-empty"},
					Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: m.c.id}}})
			}},
		{resource: "roles", principal: access.NamespaceCreator, name: "provider: slice Roles in a look-alike tenant namespace and elsewhere",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				w, ns := m.ownTenantNS(t, m.p)
				for _, at := range []struct {
					w      client.Client
					ns, id string
				}{{w, ns, forgedID}, {m.own(t, m.p, ownNS, nil), ownNS, m.c.id}} {
					f.create(at.w, m.p.client, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: at.ns, Name: wire.SliceAccessName(sliceName),
						Labels:      map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: at.id, wire.SliceNameLabel: sliceName},
						Annotations: map[string]string{wire.GrantedResourcesAnnotation: `{"cpu":"64"}`}}})
				}
			}},
		{resource: "roles", principal: access.RoleWriter, name: "provider: the slice Role's annotations and labels",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				r := &rbacv1.Role{ObjectMeta: metaOf(m.pTN, wire.SliceAccessName(sliceName))}
				f.mutate(m.roleWriter, m.p.client, r, false, func() {
					setAnnotation(r, wire.GrantedResourcesAnnotation, `{"cpu":"64"}`)
					setLabel(r, wire.RemoteClusterIDLabel, laterID)
				})
			}},
		{resource: "roles", principal: access.RoleWriter, name: "provider: a look-alike slice Role in the tenant namespace",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				f.create(m.roleWriter, m.p.client, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: m.pTN, Name: wire.SliceAccessName("matrix-claim"),
					Labels:      map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: m.c.id, wire.SliceNameLabel: "matrix-claim"},
					Annotations: map[string]string{wire.GrantedResourcesAnnotation: `{"cpu":"64"}`}}})
			}},

		// A peering user retiring itself: it deletes its own objects, by name, and nothing else.
		{resource: "rolebindings", principal: access.PeeringUser, name: "provider: deletes its own RoleBindings by name, and no other binding",
			forge: func(t *testing.T, m *matrix, f *forgery) { m.peeringUserRetires(t, f) }},
		{resource: "clusterrolebindings", principal: access.PeeringUser, name: "provider: deletes its own ClusterRoleBinding by name, and no other",
			forge: func(t *testing.T, m *matrix, f *forgery) { m.peeringUserRetires(t, f) }},
		{resource: "roles", principal: access.PeeringUser, name: "provider: deletes its own Roles by name, and no other Role",
			forge: func(t *testing.T, m *matrix, f *forgery) { m.peeringUserRetires(t, f) }},

		// Certificate requests.
		{resource: "certificatesigningrequests", principal: access.CSRCreator, name: "provider: requests labelled for the accepted Tenant and for a cluster never peered",
			forge: func(t *testing.T, m *matrix, f *forgery) {
				for i, labels := range []map[string]string{
					{wire.ManagedByLabel: wire.ManagedByValue, wire.TenantUIDLabel: m.tenantUID, wire.RemoteClusterIDLabel: m.c.id},
					{wire.ManagedByLabel: wire.ManagedByValue, wire.TenantUIDLabel: "0c4c9a4e-0000-4000-8000-000000000000", wire.RemoteClusterIDLabel: forgedID},
				} {
					req := m.tenantCSR
					if i == 1 {
						req = newAttacker(t, forgedID).csr(t)
					}
					f.create(m.csrCreator, m.p.client, &certificatesv1.CertificateSigningRequest{
						ObjectMeta: metav1.ObjectMeta{GenerateName: "matrix-", Labels: labels,
							Annotations: map[string]string{wire.TenantAnnotation: m.pTN + "/" + m.c.id}},
						Spec: certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: certificatesv1.KubeAPIServerClientSignerName,
							ExpirationSeconds: ptr.To[int32](600), Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}})
				}
			}},
	}
}

// replayedTenant is a copy of the accepted Tenant's spec in namespace ns.
func (m *matrix) replayedTenant(t *testing.T, ns string) *authv1beta1.Tenant {
	var real authv1beta1.Tenant
	require.NoError(t, m.p.client.Get(context.Background(), m.tenantKey, &real))
	return &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: real.Name, Labels: map[string]string{wire.RemoteClusterIDLabel: m.c.id}}, Spec: real.Spec}
}

func setLabel(o client.Object, k, v string) {
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	o.SetLabels(l)
}

func setAnnotation(o client.Object, k, v string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
}

// peeringUserRetires grants the matrix's peering user its real objects (as liqoctl generate
// peering-user does), has it try to delete every binding and Role it must not (the
// tenant's, the manager's, the slice's, another consumer's peering user's: each refused),
// then delete its own in the order of handshake.RetirePeeringUser. What the snapshot
// compares may not change: its own objects were made and removed within the case.
func (m *matrix) peeringUserRetires(t *testing.T, f *forgery) {
	t.Helper()
	ctx := context.Background()
	user := wire.PeeringUserName(m.c.id, "matrix")
	objs := access.ForgePeeringUserAccess(wire.DefaultLiqoNamespace, m.pTN, m.c.id, user)
	objs = append(objs, access.ForgePeeringUserAccess(wire.DefaultLiqoNamespace, m.laterTN, laterID, wire.PeeringUserName(laterID, "matrix"))...)
	for _, obj := range objs {
		require.NoError(t, m.p.client.Create(ctx, obj))
		f.changed[string(obj.GetUID())] = true // the administrator's, made for the case
		f.undo = append(f.undo, func() { _ = client.IgnoreNotFound(m.p.client.Delete(context.Background(), obj)) })
	}
	others := wire.PeeringUserClusterObjectName(laterID)
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metaOf(m.pTN, wire.TenantReaderName)},
		&rbacv1.RoleBinding{ObjectMeta: metaOf(m.pTN, wire.ControlPlaneBindingName)},
		&rbacv1.RoleBinding{ObjectMeta: metaOf(m.pTN, wire.ManagerName)},
		&rbacv1.RoleBinding{ObjectMeta: metaOf(m.pTN, wire.SliceAccessName(sliceName))},
		&rbacv1.Role{ObjectMeta: metaOf(m.pTN, wire.TenantReaderName)},
		&rbacv1.Role{ObjectMeta: metaOf(m.pTN, wire.SliceAccessName(sliceName))},
		&rbacv1.RoleBinding{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, wire.ManagerName)},
		&rbacv1.Role{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, wire.ManagerName)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName}},
		&rbacv1.RoleBinding{ObjectMeta: metaOf(m.laterTN, others)},
		&rbacv1.Role{ObjectMeta: metaOf(m.laterTN, others)},
		&rbacv1.RoleBinding{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, others)},
		&rbacv1.Role{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, others)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: others}},
	} {
		err := m.peeringUser.Delete(ctx, obj)
		require.True(t, apierrors.IsForbidden(err), "the peering user deletes %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	own := wire.PeeringUserClusterObjectName(m.c.id)
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metaOf(m.pTN, own)}, &rbacv1.Role{ObjectMeta: metaOf(m.pTN, own)},
		&rbacv1.RoleBinding{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, own)}, &rbacv1.Role{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, own)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: own}},
	} {
		require.NoError(t, m.peeringUser.Delete(ctx, obj), "the peering user deletes its own %T %s/%s", obj, obj.GetNamespace(), obj.GetName())
	}
}
