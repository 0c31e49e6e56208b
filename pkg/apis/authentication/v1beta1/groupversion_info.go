package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the authentication resources.
const Group = "authentication.liqo.io"

// GroupVersion is the group and version of this package.
var GroupVersion = schema.GroupVersion{Group: Group, Version: "v1beta1"}

// Resource names, as served by the API server.
const (
	TenantResource        = "tenants"
	IdentityResource      = "identities"
	ResourceSliceResource = "resourceslices"
	RenewResource         = "renews"
	PeeringResource       = "peerings"
)

// AddToScheme registers the types of this package in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Tenant{}, &TenantList{},
		&Identity{}, &IdentityList{},
		&ResourceSlice{}, &ResourceSliceList{},
		&Renew{}, &RenewList{},
		&Peering{}, &PeeringList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
