package handshake

import (
	"errors"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestCredentialProxy: the consumer's own credential takes the pinned proxy whoever wrote
// the Identity; with none pinned, an Identity with a proxy is refused for a check
// (verify) and taken with none for a revocation, which names what it skipped; with no
// record (a Liqo consumer) the Identity's proxy is all there is.
func TestCredentialProxy(t *testing.T) {
	const x, z = "http://x:3128", "http://z:3128"
	pinnedX := &cluster.TenantRecord{RemoteID: "cl-p", ProxyURL: ptr.To(x)}
	pinnedNone := &cluster.TenantRecord{RemoteID: "cl-p", ProxyURL: ptr.To("")}
	legacy := &cluster.TenantRecord{RemoteID: "cl-p"}
	for _, tc := range []struct {
		name         string
		rec          *cluster.TenantRecord
		proxy        string
		direct       bool
		use, skipped string
		notPinnedErr bool
	}{
		{name: "pinned: the pin, not the Identity's", rec: pinnedX, proxy: z, use: x},
		{name: "pinned, revocation: the pin", rec: pinnedX, proxy: z, direct: true, use: x},
		{name: "pinned none: none, not the Identity's", rec: pinnedNone, proxy: z, use: ""},
		{name: "nothing pinned, no proxy: none", rec: legacy, use: ""},
		{name: "nothing pinned, a proxy, check: refused", rec: legacy, proxy: z, notPinnedErr: true},
		{name: "nothing pinned, a proxy, revocation: none, skipped said", rec: legacy, proxy: z, direct: true, use: "", skipped: z},
		{name: "no record (Liqo): the Identity's", proxy: z, use: z},
	} {
		t.Run(tc.name, func(t *testing.T) {
			use, skipped, err := credentialProxy(tc.rec, "liqo", "cl-p", tc.proxy, tc.direct)
			if tc.notPinnedErr {
				if !errors.Is(err, cluster.ErrProxyNotPinned) {
					t.Fatalf("err = %v, want ErrProxyNotPinned", err)
				}
				return
			}
			if err != nil || use != tc.use || skipped != tc.skipped {
				t.Fatalf("= (%q, %q, %v), want (%q, %q, nil)", use, skipped, err, tc.use, tc.skipped)
			}
		})
	}
}
