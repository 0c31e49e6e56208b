// Package installer makes a cluster able to take part in the protocol, and undoes it: the
// CRDs, the Liqo namespace, the roles and admission policies, the cluster identity, the
// manager's Deployment and the release manifest; and, on uninstall, what belongs to
// another installation (Liqo's Helm chart, another field manager) and must be kept.
package installer
