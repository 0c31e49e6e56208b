package installer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// helmReleaseAnnotation is set by Helm on every object of a release.
const helmReleaseAnnotation = "meta.helm.sh/release-name"

// ourManagers are the field managers of this project, and those of the API server itself
// (a CRD's status).
var ourManagers = []string{wire.FieldOwner, wire.ManagerName, "kube-apiserver"}

// ForeignOwner says who, other than this project, manages an existing object: "" when it
// is this project's. An object carries this project's managed-by label when liqoctl
// made it; one without that label is this project's only when no other field manager
// ever wrote it (installations older than the label). Anything else (Liqo's Helm chart,
// another tool) is foreign: install and uninstall leave it alone.
func ForeignOwner(obj client.Object) string {
	l, a := obj.GetLabels(), obj.GetAnnotations()
	switch {
	case l[wire.ManagedByLabel] == wire.ManagedByValue:
		return ""
	case a[helmReleaseAnnotation] != "":
		return fmt.Sprintf("Helm release %q", a[helmReleaseAnnotation])
	case l[wire.ManagedByLabel] != "":
		return l[wire.ManagedByLabel]
	}
	for _, m := range obj.GetManagedFields() {
		if !slices.Contains(ourManagers, m.Manager) {
			return fmt.Sprintf("field manager %q", m.Manager)
		}
	}
	return ""
}

// Kept is an object install or uninstall left alone because another installation
// manages it.
type Kept struct {
	Kind, Name string
	// Owner is who manages it, in words.
	Owner string
	// Why, when it is not Owner alone.
	Why string
}

func (k Kept) String() string {
	if k.Why != "" {
		return fmt.Sprintf("%s %s (%s)", k.Kind, k.Name, k.Why)
	}
	return fmt.Sprintf("%s %s (managed by %s)", k.Kind, k.Name, k.Owner)
}

// foreignExisting reads the live version of obj and returns who else manages it ("" when
// it does not exist or is this project's).
func foreignExisting(ctx context.Context, c client.Client, obj client.Object) (string, error) {
	live, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return "", fmt.Errorf("%T is not an object", obj)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return "", nil
		}
		return "", err
	}
	return ForeignOwner(live), nil
}

// PeerObjectLists are the kinds of authentication.liqo.io whose objects tie this cluster
// to its peers, by CRD name.
func PeerObjectLists() map[string]client.ObjectList {
	return map[string]client.ObjectList{
		"tenants." + authv1beta1.Group:        &authv1beta1.TenantList{},
		"identities." + authv1beta1.Group:     &authv1beta1.IdentityList{},
		"resourceslices." + authv1beta1.Group: &authv1beta1.ResourceSliceList{},
		"renews." + authv1beta1.Group:         &authv1beta1.RenewList{},
	}
}

// PeerObject is one object of PeerObjectLists.
type PeerObject struct {
	CRD    string
	Object client.Object
	// Ours: it lives in a tenant namespace this cluster's records name.
	Ours bool
}

func (p PeerObject) String() string {
	return fmt.Sprintf("%s %s/%s", p.Object.GetObjectKind().GroupVersionKind().Kind, p.Object.GetNamespace(), p.Object.GetName())
}

// ListPeerObjects lists every Tenant, Identity, ResourceSlice and Renew of the cluster,
// each marked as this project's when it lives in a tenant namespace a record of the Liqo
// namespace liqoNS names. A kind whose CRD is not installed has none.
func ListPeerObjects(ctx context.Context, c client.Client, liqoNS string) ([]PeerObject, error) {
	recs, err := cluster.ListTenantRecords(ctx, c, liqoNS)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	ours := map[string]bool{}
	for _, r := range recs {
		ours[r.Namespace] = r.Namespace != ""
	}
	var out []PeerObject
	lists := PeerObjectLists()
	for _, crd := range slices.Sorted(maps.Keys(lists)) {
		list := lists[crd]
		if err := c.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		gvk, err := apiutil.GVKForObject(list, c.Scheme())
		if err != nil {
			return nil, err
		}
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			obj := it.(client.Object)
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			out = append(out, PeerObject{CRD: crd, Object: obj, Ours: ours[obj.GetNamespace()]})
		}
	}
	return out, nil
}

// KeepOnUninstall says why uninstall must leave obj (a live object, or one to look up)
// in place, nil when it may delete it: another installation manages it; a CRD some
// object this project did not make still uses (peers, listed by ListPeerObjects); a
// ClusterRole a binding this project did not make still refers to.
func KeepOnUninstall(ctx context.Context, c client.Client, obj client.Object, peers []PeerObject) (*Kept, error) {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return nil, err
	}
	live, _ := obj.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, err
	}
	k := &Kept{Kind: gvk.Kind, Name: obj.GetName()}
	if k.Owner = ForeignOwner(live); k.Owner != "" {
		return k, nil
	}
	switch gvk.Kind {
	case "CustomResourceDefinition":
		var users []string
		for _, p := range peers {
			if p.CRD == obj.GetName() && !p.Ours {
				users = append(users, p.String())
			}
		}
		if len(users) > 0 {
			k.Why = fmt.Sprintf("objects liqo-auth did not make use it: %s", strings.Join(users, ", "))
			return k, nil
		}
	case "ClusterRole":
		if b, err := foreignBinding(ctx, c, obj.GetName()); err != nil || b != "" {
			k.Why = "bound by " + b + ", which liqo-auth did not make"
			return k, err
		}
	}
	return nil, nil
}

// foreignBinding names a RoleBinding or ClusterRoleBinding to ClusterRole role that this
// project did not make ("" when there is none).
func foreignBinding(ctx context.Context, c client.Client, role string) (string, error) {
	var rbs rbacv1.RoleBindingList
	if err := c.List(ctx, &rbs); err != nil {
		return "", err
	}
	for _, b := range rbs.Items {
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == role && ForeignOwner(&b) != "" {
			return "RoleBinding " + b.Namespace + "/" + b.Name, nil
		}
	}
	var crbs rbacv1.ClusterRoleBindingList
	if err := c.List(ctx, &crbs); err != nil {
		return "", err
	}
	for _, b := range crbs.Items {
		if b.RoleRef.Name == role && ForeignOwner(&b) != "" {
			return "ClusterRoleBinding " + b.Name, nil
		}
	}
	return "", nil
}
