// Package testenv starts real, isolated Kubernetes control planes (etcd, kube-apiserver
// with RBAC, and kube-controller-manager running the CSR signer, the CSR cleaner, the
// namespace controller and the garbage collector) on loopback, for tests, benchmarks
// and local demos; with Options.Node, also a real node (containerd, kubelet, kube-proxy
// and kube-scheduler, in a network namespace of their own) that runs Pods, so that the
// manager runs as the release manifest deploys it.
//
// Each control plane has its own PKI: one CA is both the API server's client CA and the
// controller manager's cluster-signing CA, so certificates issued through
// CertificateSigningRequests really authenticate. Processes are tracked by PID and
// stopped by PID. A control plane alone touches nothing else on the machine; what a node
// changes there (a network namespace and its link, cgroups, mounts under its directory,
// the kernel settings the kubelet sets) has names fixed in nodehost.go, and is removed or
// restored when the node stops, or when the next one starts after a crash.
package testenv
