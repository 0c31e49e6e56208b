package cli

import (
	clientfeatures "k8s.io/client-go/features"
)

// watchListEnv is the environment variable through which client-go's WatchListClient
// feature is set by hand (client-go's KUBE_FEATURE_<name>).
const watchListEnv = "KUBE_FEATURE_" + string(clientfeatures.WatchListClient)

// ListingInformers makes the informers of this process fill with one LIST, as client-go did
// before its WatchListClient feature (on by default since Kubernetes 1.35), unless
// KUBE_FEATURE_WatchListClient is set (getenv says). liqoctl's in-process controllers live
// for one command and wait for their informers before their first reconcile: with the
// streaming watch-list, an informer is synced only once the API server's watch cache has
// caught up with the revision it read and sent its initial-events bookmark, which waits for
// etcd's next progress notification (the API server asks one every 100 ms). That held a
// provider's in-process tenant controller back by up to 100 ms in most handshakes; a LIST is
// answered at once. It is called first in main, before any informer or feature check:
// client-go's feature gates are the process's.
func ListingInformers(getenv func(string) string) {
	if getenv(watchListEnv) != "" {
		return
	}
	clientfeatures.ReplaceFeatureGates(listing{clientfeatures.FeatureGates()})
}

// listing is client-go's feature gates with WatchListClient off.
type listing struct{ clientfeatures.Gates }

// Enabled is the gate's setting, WatchListClient off.
func (g listing) Enabled(f clientfeatures.Feature) bool {
	return f != clientfeatures.WatchListClient && g.Gates.Enabled(f)
}
