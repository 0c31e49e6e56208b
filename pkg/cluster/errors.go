package cluster

import "errors"

// ErrNotInstalled means the cluster has no identity yet: liqoctl install creates it.
var ErrNotInstalled = errors.New("the cluster identity is not installed")

// ErrTenantNamespaceNotFound means no tenant namespace exists for a remote cluster.
var ErrTenantNamespaceNotFound = errors.New("tenant namespace not found")

// ErrRotationUnfinished means a key rotation cannot take its next step because an earlier
// one is not finished.
var ErrRotationUnfinished = errors.New("a key rotation is unfinished")
