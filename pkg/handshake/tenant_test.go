package handshake

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

func TestTenantDone(t *testing.T) {
	cond := func(typ string, ok bool, reason string, ago time.Duration) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: reason + " message", LastTransitionTime: metav1.NewTime(time.Now().Add(-ago))}
	}
	withCert := &authv1beta1.AuthParams{SignedCRT: []byte("crt")}
	cases := []struct {
		name    string
		gen     int64
		status  authv1beta1.TenantStatus
		done    bool
		failMsg string
	}{
		{"not observed", 2, authv1beta1.TenantStatus{ObservedGeneration: 1}, false, ""},
		{"no status", 1, authv1beta1.TenantStatus{ObservedGeneration: 1}, false, ""},
		{"ready", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, AuthParams: withCert, Conditions: []metav1.Condition{cond("Ready", true, "Ready", 0)}}, true, ""},
		{"ready without certificate", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond("Ready", true, "Ready", 0)}}, false, ""},
		{"refused", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond("Authenticated", false, "SignatureInvalid", 0)}}, false, "refused the handshake (SignatureInvalid)"},
		{"nonce missing, young", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond("Authenticated", false, string(authv1beta1.ReasonNonceMissing), 0)}}, false, ""},
		{"nonce missing, old", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond("Authenticated", false, string(authv1beta1.ReasonNonceMissing), time.Minute)}}, false, "NonceMissing"},
		{"misplaced, young (the record may not be seen yet)", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond("Authenticated", false, authv1beta1.ReasonTenantMisplaced, 0)}}, false, ""},
		{"misplaced, written in the future", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond("Authenticated", false, authv1beta1.ReasonTenantMisplaced, -time.Hour)}}, false, authv1beta1.ReasonTenantMisplaced},
		{"misplaced, old", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond("Authenticated", false, authv1beta1.ReasonTenantMisplaced, time.Minute)}}, false, authv1beta1.ReasonTenantMisplaced},
		{"pending certificate", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond("Authenticated", true, "HandshakeAccepted", 0), cond("CertificateIssued", false, authv1beta1.ReasonCertificatePending, 0)}}, false, ""},
		{"approved not issued", 1, authv1beta1.TenantStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond("Authenticated", true, "HandshakeAccepted", 0), cond("CertificateIssued", false, authv1beta1.ReasonApprovedNotIssued, 0)}}, false, "issued no certificate (ApprovedNotIssued)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Generation: tc.gen}, Status: tc.status}
			done, _, err := tenantDone(tn)
			assert.Equal(t, tc.done, done)
			if tc.failMsg == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.failMsg)
			}
		})
	}
}

func TestCheckAdminState(t *testing.T) {
	assert.NoError(t, checkAdminState(nil, nil, "c"))
	tn := &authv1beta1.Tenant{Spec: authv1beta1.TenantSpec{TenantCondition: authv1beta1.TenantConditionDrained}}
	assert.ErrorContains(t, checkAdminState(tn, nil, "c"), "drained")
	tn.Spec.TenantCondition = authv1beta1.TenantConditionCordoned
	assert.ErrorContains(t, checkAdminState(tn, nil, "c"), "cordoned")
	tn.Status.Certificate = &authv1beta1.CertificateInfo{}
	assert.NoError(t, checkAdminState(tn, nil, "c"), "a cordoned tenant keeps what it has")

	// The record is the administrator's: a spec set back to Active does not undo it, and
	// without a Tenant it still holds.
	drained := &cluster.TenantRecord{State: string(authv1beta1.TenantConditionDrained)}
	tn.Spec.TenantCondition = authv1beta1.TenantConditionActive
	assert.ErrorContains(t, checkAdminState(tn, drained, "c"), "drained")
	assert.ErrorContains(t, checkAdminState(nil, drained, "c"), "uncordon tenant c")
	cordoned := &cluster.TenantRecord{State: string(authv1beta1.TenantConditionCordoned)}
	assert.ErrorContains(t, checkAdminState(nil, cordoned, "c"), "cordoned")
	assert.NoError(t, checkAdminState(tn, cordoned, "c"), "a cordoned tenant keeps its certificate")
	assert.NoError(t, checkAdminState(tn, &cluster.TenantRecord{}, "c"))
}

func TestNormalizeHost(t *testing.T) {
	assert.Equal(t, normalizeHost("https://LOCALHOST:443/"), normalizeHost("https://127.0.0.1"))
	assert.NotEqual(t, normalizeHost("https://127.0.0.1:6443"), normalizeHost("https://127.0.0.1:6444"))
}

// TestCheckPublishedProxy: the proxy a Tenant's status publishes counts only when it is
// the one its spec asks for, and ForgeIdentity refuses any other.
func TestCheckPublishedProxy(t *testing.T) {
	const asked, other = "socks5://proxy.example.com:1080", "http://proxy.attacker.example:3128"
	cases := []struct {
		name          string
		spec, status  *string
		wantPublished bool
	}{
		{"none asked, none published", nil, nil, true},
		{"none asked, an empty one published", nil, ptr.To(""), true},
		{"asked and published", ptr.To(asked), ptr.To(asked), true},
		{"none asked, one published", nil, ptr.To(other), false},
		{"asked, another published", ptr.To(asked), ptr.To(other), false},
		{"asked, none published", ptr.To(asked), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := &authv1beta1.Tenant{Spec: authv1beta1.TenantSpec{ProxyURL: tc.spec},
				Status: authv1beta1.TenantStatus{TenantNamespace: "liqo-tenant-cl-c", AuthParams: &authv1beta1.AuthParams{SignedCRT: []byte("crt"), ProxyURL: tc.status}}}
			err := checkPublishedProxy(tn)
			id, forgeErr := ForgeIdentity("cl-p", tn, "liqo-tenant-cl-p", ptr.Deref(tc.spec, ""))
			if tc.wantPublished {
				assert.NoError(t, err)
				require.NoError(t, forgeErr)
				assert.Equal(t, ptr.Deref(tc.spec, ""), ptr.Deref(id.Spec.AuthParams.ProxyURL, ""))
				return
			}
			assert.ErrorIs(t, err, cluster.ErrNotPublished)
			assert.ErrorIs(t, forgeErr, cluster.ErrNotPublished)
		})
	}
}
