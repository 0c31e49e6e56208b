package cli

import (
	"testing"

	clientfeatures "k8s.io/client-go/features"
)

// TestListingInformers: liqoctl's informers list instead of streaming (client-go's
// WatchListClient off), the other features as they were, unless the user set
// KUBE_FEATURE_WatchListClient themselves.
func TestListingInformers(t *testing.T) {
	before := clientfeatures.FeatureGates()
	t.Cleanup(func() { clientfeatures.ReplaceFeatureGates(before) })
	if !before.Enabled(clientfeatures.WatchListClient) {
		t.Fatal("client-go's WatchListClient is off by default: this test no longer tests anything")
	}

	ListingInformers(func(string) string { return "true" })
	if !clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		t.Fatal("KUBE_FEATURE_WatchListClient set by the user was overridden")
	}

	ListingInformers(func(string) string { return "" })
	gates := clientfeatures.FeatureGates()
	if gates.Enabled(clientfeatures.WatchListClient) {
		t.Fatal("WatchListClient is still on")
	}
	if got, want := gates.Enabled(clientfeatures.InformerResourceVersion), before.Enabled(clientfeatures.InformerResourceVersion); got != want {
		t.Fatalf("InformerResourceVersion changed: %v, want %v", got, want)
	}
}
