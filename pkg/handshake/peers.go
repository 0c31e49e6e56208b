package handshake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// ErrUnknownPeer is returned by a removal naming a cluster this one never knew: most
// likely a typo, which must not pass for a successful cleanup.
var ErrUnknownPeer = errors.New("unknown cluster")

// KnownPeers lists, sorted, the cluster IDs cluster s knows as peers: those of its tenant
// records and of the namespaces labelled as tenant namespaces. Credentials that may not
// read one of the two get the other.
func KnownPeers(ctx context.Context, s *Side) ([]string, error) {
	seen := map[string]bool{}
	recs, recErr := cluster.ListTenantRecords(ctx, s.Client, s.Namespace)
	for _, r := range recs {
		seen[r.RemoteID] = true
	}
	var list corev1.NamespaceList
	nsErr := s.Client.List(ctx, &list, client.MatchingLabels{wire.TenantNamespaceLabel: "true"})
	for _, ns := range list.Items {
		if id := ns.Labels[wire.RemoteClusterIDLabel]; id != "" {
			seen[id] = true
		}
	}
	if recErr != nil && nsErr != nil {
		return nil, s.Explain(recErr, "listing the known peers")
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// CheckKnownPeer is the one rule of every removal (unauthenticate, delete peering-user,
// delete resourceslice): removing what is already gone succeeds and says there was nothing
// to remove, so that re-runs converge; naming a cluster this one never knew fails, listing
// the known ones, as kubectl delete fails on a name that does not exist.
func CheckKnownPeer(ctx context.Context, s *Side, peerID, flag string) error {
	known, err := KnownPeers(ctx, s)
	if err != nil {
		return err
	}
	if slices.Contains(known, peerID) {
		return nil
	}
	return UnknownPeerError(peerID, flag, known)
}

// UnknownPeerError words a miss: the flag, the value, and the peers this cluster knows.
func UnknownPeerError(peerID, flag string, known []string) error {
	if len(known) == 0 {
		return fmt.Errorf("%s %q: %w: this cluster knows no peer at all", flag, peerID, ErrUnknownPeer)
	}
	return fmt.Errorf("%s %q: %w: the peers this cluster knows are %s", flag, peerID, ErrUnknownPeer, strings.Join(known, ", "))
}
