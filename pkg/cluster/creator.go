package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// Creator is who created a namespace, as the API server authenticated them: everything a
// SubjectAccessReview about them needs.
type Creator struct {
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// creatorEscapes are the characters escaped in an item of the creator annotations' lists
// (wire.CreatedByGroupsAnnotation): the escape itself, then the separators.
var creatorEscapes = [][2]string{{"%", "%25"}, {",", "%2C"}, {"=", "%3D"}, {";", "%3B"}}

// NamespaceCreator returns who created ns, as the API server recorded it. ok is false when
// it recorded nothing (a namespace made without the labels); err is set when the record
// cannot be read exactly (made by an older policy, or malformed): a caller then trusts no
// part of it.
func NamespaceCreator(ns *corev1.Namespace) (c Creator, ok bool, err error) {
	c.User, ok = ns.Annotations[wire.CreatedByAnnotation]
	if !ok || c.User == "" {
		return Creator{}, false, nil
	}
	c.UID = ns.Annotations[wire.CreatedByUIDAnnotation]
	if c.Groups, err = DecodeCreatorList(ns.Annotations[wire.CreatedByGroupsAnnotation]); err != nil {
		return Creator{}, true, fmt.Errorf("annotation %s: %w", wire.CreatedByGroupsAnnotation, err)
	}
	if c.Extra, err = DecodeCreatorExtra(ns.Annotations[wire.CreatedByExtraAnnotation]); err != nil {
		return Creator{}, true, fmt.Errorf("annotation %s: %w", wire.CreatedByExtraAnnotation, err)
	}
	return c, true, nil
}

// EncodeCreatorList is the Go twin of the admission policy's encoding of a list (each item
// escaped and followed by ","), for tests and tools.
func EncodeCreatorList(items []string) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(escapeCreatorItem(it))
		b.WriteByte(',')
	}
	return b.String()
}

// EncodeCreatorExtra is the Go twin of the admission policy's encoding of extra: keys
// sorted, each "key=" then its values as a list, then ";".
func EncodeCreatorExtra(extra map[string][]string) string {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(escapeCreatorItem(k) + "=" + EncodeCreatorList(extra[k]) + ";")
	}
	return b.String()
}

// DecodeCreatorList reads a list EncodeCreatorList wrote. It refuses anything else: an
// unterminated item (the comma-joined format of older policies), an unknown escape.
func DecodeCreatorList(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if !strings.HasSuffix(s, ",") {
		return nil, errors.New("the last item is not terminated by ','")
	}
	var out []string
	for _, raw := range strings.Split(strings.TrimSuffix(s, ","), ",") {
		it, err := unescapeCreatorItem(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// DecodeCreatorExtra reads what EncodeCreatorExtra wrote, refusing anything else.
func DecodeCreatorExtra(s string) (map[string][]string, error) {
	if s == "" {
		return nil, nil
	}
	if !strings.HasSuffix(s, ";") {
		return nil, errors.New("the last entry is not terminated by ';'")
	}
	out := map[string][]string{}
	for _, entry := range strings.Split(strings.TrimSuffix(s, ";"), ";") {
		rawKey, rawValues, found := strings.Cut(entry, "=")
		if !found {
			return nil, fmt.Errorf("entry %q has no '='", entry)
		}
		k, err := unescapeCreatorItem(rawKey)
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("key %q appears twice", k)
		}
		if out[k], err = DecodeCreatorList(rawValues); err != nil {
			return nil, err
		}
		if out[k] == nil {
			out[k] = []string{}
		}
	}
	return out, nil
}

func escapeCreatorItem(s string) string {
	for _, e := range creatorEscapes {
		s = strings.ReplaceAll(s, e[0], e[1])
	}
	return s
}

// unescapeCreatorItem undoes escapeCreatorItem, refusing a separator left unescaped or an
// escape it does not write.
func unescapeCreatorItem(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',', '=', ';':
			return "", fmt.Errorf("item %q holds an unescaped %q", s, s[i])
		case '%':
			if i+3 > len(s) {
				return "", fmt.Errorf("item %q ends in a partial escape", s)
			}
			found := false
			for _, e := range creatorEscapes {
				if s[i:i+3] == e[1] {
					b.WriteString(e[0])
					found = true
				}
			}
			if !found {
				return "", fmt.Errorf("item %q holds an unknown escape %q", s, s[i:i+3])
			}
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// MayRecord asks the API server, with a SubjectAccessReview made through c, whether the
// creator cr, with every attribute it was authenticated with (UID, groups, extra), may
// create the ConfigMaps of the Liqo namespace liqoNS: make a tenant record itself.
func MayRecord(ctx context.Context, c client.Client, liqoNS string, cr Creator) (bool, error) {
	var extra map[string]authorizationv1.ExtraValue
	if len(cr.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(cr.Extra))
		for k, v := range cr.Extra {
			extra[k] = v
		}
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: cr.User, UID: cr.UID, Groups: cr.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: liqoNS, Verb: "create", Resource: "configmaps"}}}
	if err := c.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("asking whether %q may make tenant records: %w", cr.User, err)
	}
	return sar.Status.Allowed, nil
}

// DesignatedByCreator says whether ns, a namespace this cluster has not recorded, was
// made the tenant namespace of remoteID by whoever created it: it is live, has the
// protocol's name and labels for remoteID, the API server recorded its creator exactly
// (the creator annotations, which admission sets on a namespace made with those labels),
// and that creator may make tenant records in liqoNS (MayRecord). The labels alone, which
// anyone who may create a namespace can set, never make one. This is the designation
// controller's rule, and liqoctl's for the namespace it would create when that exists
// already: made by a run of it cut off before it recorded the namespace.
func DesignatedByCreator(ctx context.Context, c client.Client, liqoNS string, ns *corev1.Namespace, remoteID string) (Creator, bool, error) {
	if ns.DeletionTimestamp != nil || !IsTenantNamespaceOf(ns, remoteID) || ns.Name != wire.TenantNamespaceName(remoteID) {
		return Creator{}, false, nil
	}
	cr, ok, err := NamespaceCreator(ns)
	if !ok || err != nil {
		return cr, false, err
	}
	allowed, err := MayRecord(ctx, c, liqoNS, cr)
	return cr, allowed, err
}
