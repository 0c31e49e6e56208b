package info

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/rotation"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// outputFlags is -o format ("" for the table), as a command line sets it.
func outputFlags(format string) *cli.OutputFlags {
	o := &cli.OutputFlags{}
	cmd := &cobra.Command{Use: "x"}
	o.AddFlags(cmd, "")
	if format != "" {
		_ = cmd.Flags().Set("output", format)
	}
	return o
}

var at = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// sample is a report whose every string field is s (where a peer could have written it),
// built through the same entries build uses.
func sample(s string) *Report {
	conds := []metav1.Condition{{Type: authv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: s, Message: s}}
	refusal := &authv1beta1.Refusal{Reason: s, Time: metav1.NewTime(at)}
	t := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: s}, Spec: authv1beta1.TenantSpec{ClusterID: authv1beta1.ClusterID(s)},
		Status: authv1beta1.TenantStatus{TenantCondition: authv1beta1.TenantCondition(s), Conditions: conds, LastRefusal: refusal,
			Certificate: &authv1beta1.CertificateInfo{SerialNumber: s, NotAfter: &metav1.Time{Time: at.Add(time.Hour)}}}}
	id := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: s}, Spec: authv1beta1.IdentitySpec{ClusterID: authv1beta1.ClusterID(s), Type: authv1beta1.IdentityType(s)},
		Status: authv1beta1.IdentityStatus{Conditions: conds, LastRefusal: refusal}}
	expires := at.Add(time.Hour)
	stale := at.Add(-time.Minute)
	return &Report{APIVersion: SchemaVersion, ClusterID: s, KeyFingerprint: s, APIServer: s, CAFingerprint: s,
		Manager:      Manager{State: ManagerAbsent, Holder: s, Version: s, StaleSince: &stale, Deployment: &Deployment{Name: s, Replicas: 2}, detail: s},
		Tenants:      []Entry{tenantEntry(t, at), {Namespace: s, Cluster: s, State: s, next: s}},
		Identities:   []Entry{identityEntry(id, at)},
		Certificates: []Certificate{{Cluster: s, Serial: s, KeyFingerprint: s, Slice: s, Expires: expires, words: s}},
		PeeringUsers: []handshake.PeeringUser{{ConsumerID: s, User: s, Namespace: s, Serial: s, NotAfter: expires}},
		Approvals:    []Approval{{Cluster: s, Namespace: s, State: s, KeyFingerprint: s, Since: &expires, Reason: s}},
		ResourceSlices: []Slice{{Name: s, Namespace: s, Role: s, Cluster: s, State: sliceDenied, Reason: s,
			Resources: s, Expires: &expires, decision: s}},
		KeyRotation: &rotation.Status{Phase: rotation.Phase(s), Peers: []rotation.Progress{{Peer: s, State: rotation.State(s), Reason: s, Run: s}},
			SlicesOnPrevious: []string{s}, TenantsOnPrevious: []string{s}},
	}
}

// FuzzInfoEscapes: whatever another cluster wrote into the strings info shows (names,
// conditions, refusals, slices), no output format prints a control character, a C1
// control or a bidirectional override raw.
func FuzzInfoEscapes(f *testing.F) {
	for _, s := range []string{"cl-a", "\x1b]0;pwned\x07", "\u009b2J", "\u202egnp.exe", "\xff", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, format := range []string{"", "json", "yaml", "jsonpath={..}", "go-template={{.}}"} {
			var b bytes.Buffer
			require.NoError(t, printReport(&b, sample(s), outputFlags(format)))
			if i := cli.Unsafe(b.String()); i >= 0 {
				t.Fatalf("-o %q prints an unsafe rune at %d: %q", format, i, b.String())
			}
		}
	})
}

// TestInfoGolden: the JSON schema (info.liqo-auth.io/v1) and the table, as committed in
// testdata (go test ./internal/cmd/info -update rewrites them).
func TestInfoGolden(t *testing.T) {
	expires, renewed, refused := at.Add(24*time.Hour), at.Add(-time.Hour), at.Add(-30*time.Minute)
	// A drained tenant whose last handshake was refused, and a slice identity whose
	// certificate expired after a refused renewal: built as build builds them.
	drained := tenantEntry(&authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo-tenant-cl-d"}, Spec: authv1beta1.TenantSpec{ClusterID: "cl-d"},
		Status: authv1beta1.TenantStatus{TenantCondition: authv1beta1.TenantConditionDrained,
			Conditions:  []metav1.Condition{{Type: authv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "TenantDrained", Message: "the administrator drained this tenant"}},
			LastRefusal: &authv1beta1.Refusal{Reason: "TenantDrained", Time: metav1.NewTime(refused)},
			Certificate: &authv1beta1.CertificateInfo{SerialNumber: "4a", NotAfter: &metav1.Time{Time: expires}}}}, at)
	expired := identityEntry(&authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo-tenant-cl-q"},
		Spec: authv1beta1.IdentitySpec{ClusterID: "cl-q", Type: authv1beta1.ResourceSliceIdentityType},
		Status: authv1beta1.IdentityStatus{Conditions: []metav1.Condition{{Type: authv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"}},
			LastRefusal: &authv1beta1.Refusal{Reason: "NonceSignatureInvalid", Time: metav1.NewTime(refused)},
			Certificate: &authv1beta1.CertificateInfo{SerialNumber: "5b", NotAfter: &metav1.Time{Time: renewed}}}}, at)
	r := &Report{APIVersion: SchemaVersion, ClusterID: "cl-a", KeyFingerprint: "sha256:0a", CAFingerprint: "sha256:0c", APIServer: "https://a.example:6443",
		Manager: Manager{State: ManagerRunning, Holder: "liqo-auth-manager-1", Version: "v1.2.3", Deployment: &Deployment{Name: "liqo-auth-manager", Replicas: 2, Ready: 2},
			detail: "running (liqo-auth-manager-1), version v1.2.3; Deployment liqo/liqo-auth-manager 2/2 ready"},
		Tenants: []Entry{{Namespace: "liqo-tenant-cl-b", Cluster: "cl-b", State: "Active", Ready: true, Reason: "Ready", Serial: "1f", Expires: &expires, LastRenewal: &renewed},
			{Namespace: "liqo-tenant-cl-c", Cluster: "cl-c", State: "NonceIssued", next: "waiting for the consumer's Tenant"},
			drained},
		Identities: []Entry{{Namespace: "liqo-tenant-cl-p", Cluster: "cl-p", Type: "ControlPlane", State: identityNoKubeconfig, Serial: "2e", Expires: &expires,
			next: "no kubeconfig Secret liqo-tenant-cl-p/kubeconfig-controlplane-cl-p"},
			expired},
		Certificates: []Certificate{{Cluster: "cl-b", Serial: "1f", KeyFingerprint: "sha256:0b", Expires: expires, Authorizes: true, words: "the access of Tenant liqo-tenant-cl-b/cl-b"}},
		PeeringUsers: []handshake.PeeringUser{{ConsumerID: "cl-c", User: "liqo-peer-user-cl-c-x1", Namespace: "liqo-tenant-cl-c", Serial: "3d", NotAfter: expires},
			{ConsumerID: "cl-d", User: "liqo-peer-user-cl-d-x2", Namespace: "liqo-tenant-cl-d", Serial: "4e", NotAfter: expires, Retired: true}},
		Approvals: []Approval{{Cluster: "cl-e", Namespace: "liqo-tenant-cl-e", State: approvalPending, KeyFingerprint: "sha256:0e", Since: &refused},
			{Cluster: "cl-f", Namespace: "liqo-tenant-cl-f", State: approvalDenied, KeyFingerprint: "sha256:0f", Since: &renewed, Reason: "not a customer"}},
		ResourceSlices: []Slice{{Name: "gpu", Namespace: "liqo-tenant-cl-b", Role: "provider", Cluster: "cl-b", State: sliceDenied, Reason: "ResourceSliceResourcesDenied",
			Resources: "cpu=4", decision: "Denied: over the tenant's limits"},
			{Name: "batch", Namespace: "liqo-tenant-cl-p", Role: "consumer", Cluster: "cl-p", State: "Accepted", Resources: "cpu=2,memory=4Gi", Expires: &expires}},
	}
	for format, file := range map[string]string{"json": "info.golden.json", "": "info.golden.txt"} {
		var b bytes.Buffer
		require.NoError(t, printReport(&b, r, outputFlags(format)))
		golden := filepath.Join("testdata", file)
		if *update {
			require.NoError(t, os.MkdirAll("testdata", 0o755))
			require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
		}
		want, err := os.ReadFile(golden)
		require.NoError(t, err)
		assert.Equal(t, string(want), b.String(), "%s changed: additive fields only within %s (docs/operations.md)", file, SchemaVersion)
	}
}
