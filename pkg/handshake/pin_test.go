package handshake

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestRefusedPinWritesNothing: a handshake that asks for another proxy, tenant namespace
// or CA than the ones pinned is refused, and pins nothing else on the way (helper-44: the
// proxy was checked after the write that pinned the namespace and the CA).
func TestRefusedPinWritesNothing(t *testing.T) {
	const fpA, fpB = "sha256:" + "aa", "sha256:" + "bb"
	for _, tc := range []struct {
		name   string
		pinned func(r *cluster.TenantRecord)
		pin    func(ctx context.Context, s *Side) error
		want   error
		say    string
	}{
		{name: "another proxy", pinned: func(r *cluster.TenantRecord) { r.ProxyURL = ptr.To("http://a:3128") },
			pin: func(ctx context.Context, s *Side) error {
				return PinProxy(ctx, s, "cl-p", "", "", "http://b:3128", "ns-b", false)
			},
			want: ErrProxyChanged, say: `not proxy "http://b:3128"`},
		{name: "another tenant namespace", pinned: func(r *cluster.TenantRecord) { r.ProviderTenantNamespace = "ns-a" },
			pin:  func(ctx context.Context, s *Side) error { return PinProxy(ctx, s, "cl-p", "", "", "", "ns-b", false) },
			want: cluster.ErrTenantNamespaceNotPinned, say: `not "ns-b"`},
		{name: "another CA", pinned: func(r *cluster.TenantRecord) { r.CAFingerprint = fpA },
			pin: func(ctx context.Context, s *Side) error {
				return pinRecord(ctx, s, "cl-p", fpB, "the provider now presents CA "+fpB, ptr.To(""), "ns-b", nil, false)
			},
			say: fpB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
			if err := cluster.UpdateTenantRecord(ctx, c, c, "liqo", "cl-p", true, func(r *cluster.TenantRecord) error {
				tc.pinned(r)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			before, err := cluster.GetTenantRecord(ctx, c, "liqo", "cl-p")
			if err != nil {
				t.Fatal(err)
			}
			s := &Side{Scope: Local, Client: c, Namespace: "liqo", ClusterID: "cl-c", Report: &lines{}}
			err = tc.pin(ctx, s)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("pinning gave %v, want %v saying %q", err, tc.want, tc.say)
			}
			after, err := cluster.GetTenantRecord(ctx, c, "liqo", "cl-p")
			if err != nil {
				t.Fatal(err)
			}
			if after.CAFingerprint != before.CAFingerprint || after.ProviderTenantNamespace != before.ProviderTenantNamespace ||
				after.PinnedProxy() != before.PinnedProxy() || (after.ProxyURL == nil) != (before.ProxyURL == nil) {
				t.Errorf("a refused pin wrote CA %q, namespace %q, proxy %v (before: %q, %q, %v)",
					after.CAFingerprint, after.ProviderTenantNamespace, after.ProxyURL, before.CAFingerprint, before.ProviderTenantNamespace, before.ProxyURL)
			}
		})
	}
}

// TestManagerPinIsReplacedByTheProvidersWordOnly: the manager's pin of a Peering's legacy
// peering (PinnedByManager) is a guess: authenticate, which has the provider's word, and
// generate tenant --remote-tenant-namespace, its administrator's, replace it; a pin
// without that word (no replace: generate tenant's default) is refused by it as by any
// pin, with the way to give it.
func TestManagerPinIsReplacedByTheProvidersWordOnly(t *testing.T) {
	for _, replace := range []bool{true, false} {
		ctx := context.Background()
		c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
		if err := cluster.UpdateTenantRecord(ctx, c, c, "liqo", "cl-p", true, func(r *cluster.TenantRecord) error {
			r.ProviderTenantNamespace, r.ProxyURL, r.PinnedOnce, r.PinnedByManager = "liqo-tenant-cl-c", ptr.To(""), true, true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s := &Side{Scope: Local, Client: c, Namespace: "liqo", ClusterID: "cl-c", Report: &lines{}}
		err := pinRecord(ctx, s, "cl-p", "", "", ptr.To("http://p:3128"), "ns-n", nil, replace)
		rec, getErr := cluster.GetTenantRecord(ctx, c, "liqo", "cl-p")
		if getErr != nil {
			t.Fatal(getErr)
		}
		switch {
		case replace && (err != nil || rec.ProviderTenantNamespace != "ns-n" || rec.PinnedProxy() != "http://p:3128" || rec.PinnedByManager):
			t.Errorf("authenticate's pin: %v; record pins %q, %q, by the manager %v", err, rec.ProviderTenantNamespace, rec.PinnedProxy(), rec.PinnedByManager)
		case !replace && (!errors.Is(err, cluster.ErrTenantNamespaceNotPinned) || !strings.Contains(err.Error(), "--remote-tenant-namespace") ||
			rec.ProviderTenantNamespace != "liqo-tenant-cl-c" || !rec.PinnedByManager):
			t.Errorf("generate tenant's pin: %v; record pins %q, by the manager %v", err, rec.ProviderTenantNamespace, rec.PinnedByManager)
		}
	}
}
