// Package access is what each principal may do, as data: the RBAC rules of a consumer's
// control-plane identity, of a slice, of a peering user and of liqo-auth-manager, the
// objects that grant them, and the admission policies that bound what RBAC cannot (the
// manager's certificate requests and bindings, a peering user's nonce, the recorded creator
// of a tenant namespace). It reads no cluster: controllers and commands apply what it forges.
package access
