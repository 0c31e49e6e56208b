// Package revocation proves that a user no longer holds what it was granted: Kubernetes
// cannot revoke a client certificate, so removal is proven by SubjectAccessReviews for
// every permission the grant held and by a scan of every binding that names the user or
// its groups.
package revocation
