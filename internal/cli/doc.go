// Package cli is what every liqoctl command shares: the global options and the flags of
// one or two clusters, the connection to each cluster, the scoped progress printer on
// stderr, the -o yaml|json printer on stdout, and the decision to run the controllers
// in-process when no liqo-auth-manager runs in a cluster.
package cli
