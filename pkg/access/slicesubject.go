package access

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// SliceSubject is the subject a slice's RoleBinding names, from the slice's accepted CSR:
// Group keyGroup when the CSR carries a key group (authn.CSRKeyGroup: a key-bound
// identity, whose certificate for any other key authorizes nothing), else User user
// (Liqo's form).
func SliceSubject(user, keyGroup string) rbacv1.Subject {
	if keyGroup != "" {
		return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: keyGroup}
	}
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}
}
