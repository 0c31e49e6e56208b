package handshake

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// Peering user lifetimes: the certificate of a peering user expires; Liqo's never do.
const (
	DefaultPeeringUserTTL = 24 * time.Hour
	MaxPeeringUserTTL     = 7 * 24 * time.Hour
)

// ErrPeeringUserExists means the consumer has a live peering user already.
var ErrPeeringUserExists = errors.New("a peering user exists")

// PeeringUser is a credential a provider's administrator hands to a consumer's: a client
// certificate for a user that may drive the handshake of that one consumer, and nothing
// else.
type PeeringUser struct {
	ConsumerID string    `json:"consumerClusterID"`
	User       string    `json:"user"`
	Namespace  string    `json:"namespace"`
	Serial     string    `json:"serial"`
	NotAfter   time.Time `json:"notAfter"`
	// Retired is set, by ListPeeringUsers, for a peering user whose certificate has not
	// expired but which authorizes nothing of a peering user's permissions any more: it
	// retired itself once its consumer's Identity was ready (RetirePeeringUser), or its
	// grants were removed. generate peering-user replaces it.
	Retired bool `json:"retired,omitempty"`
	// Kubeconfig is set only when the peering user is generated.
	Kubeconfig []byte `json:"-"`
}

// GeneratePeeringUser issues a peering user for consumerID on the provider p: a fresh key
// (never the cluster key), a certificate for the unique user liqo-peer-user-<consumer>-<random>
// (O liqo.io) issued by the cluster's client signer through the CSR API, valid for ttl,
// and its roles in the consumer's tenant namespace (made now, by this administrator's act),
// the Liqo namespace and, by name, the two namespaces it reads. A live peering user of the
// same consumer is an error; an expired one, or one that retired (it authorizes nothing:
// RetirePeeringUser), is replaced.
func GeneratePeeringUser(ctx context.Context, p *Side, consumerID string, ttl time.Duration, now time.Time) (*PeeringUser, error) {
	existing, err := peeringUsers(ctx, p, consumerID, true)
	if err != nil {
		return nil, err
	}
	for _, u := range existing {
		if replaceErr := replacePeeringUser(ctx, p, u, now); replaceErr != nil {
			return nil, replaceErr
		}
	}
	tn, err := p.EnsureTenantNamespace(ctx, consumerID)
	if err != nil {
		return nil, err
	}
	suffix := make([]byte, 4)
	if _, readErr := rand.Read(suffix); readErr != nil {
		return nil, readErr
	}
	user := wire.PeeringUserName(consumerID, hex.EncodeToString(suffix))
	key, err := authn.GenerateKey(authn.Ed25519)
	if err != nil {
		return nil, err
	}
	certPEM, err := issueClientCertificate(ctx, p, key, user, ttl)
	if err != nil {
		return nil, err
	}
	cert, err := authn.ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	pu := &PeeringUser{ConsumerID: consumerID, User: user, Namespace: tn, Serial: cert.SerialNumber.Text(16), NotAfter: cert.NotAfter}
	// Recorded before anything is granted: no peering user holds a grant that info and
	// delete peering-user do not know of.
	if updateTenantRecordErr := cluster.UpdateTenantRecord(ctx, p.Client, p.Client, p.Namespace, consumerID, false, func(rec *cluster.TenantRecord) error {
		rec.PeeringUser = &cluster.RecordedPeeringUser{User: user, Serial: pu.Serial, NotAfter: pu.NotAfter}
		return nil
	}); updateTenantRecordErr != nil {
		return nil, p.Explain(updateTenantRecordErr, "recording the peering user")
	}
	for _, obj := range access.ForgePeeringUserAccess(p.Namespace, tn, consumerID, user) {
		obj.SetAnnotations(map[string]string{wire.PeeringUserExpiresAnnotation: pu.NotAfter.UTC().Format(time.RFC3339), wire.PeeringUserSerialAnnotation: pu.Serial})
		if applyErr := cluster.Apply(ctx, p.Client, obj, wire.FieldOwner); applyErr != nil {
			return nil, p.Explain(applyErr, "granting the peering user its permissions")
		}
	}
	server, ca, err := AdvertisedServer(ctx, p)
	if err != nil {
		return nil, err
	}
	pu.Kubeconfig, err = authn.ForgeKubeconfig(authn.KubeconfigParams{ClusterName: p.ClusterID, User: user, Server: server, CA: ca,
		CertPEM: certPEM, Key: key, Namespace: tn}, now)
	if err != nil {
		return nil, fmt.Errorf("forging the peering user's kubeconfig: %w", err)
	}
	return pu, nil
}

// replacePeeringUser removes the recorded peering user u of a consumer, for a new one: an
// expired one, or one that retired (it authorizes nothing), with what it left (its
// unbound ClusterRole); a live one is ErrPeeringUserExists.
func replacePeeringUser(ctx context.Context, p *Side, u PeeringUser, now time.Time) error {
	if now.Before(u.NotAfter) {
		retired, err := peeringUserRetired(ctx, p, u)
		if err != nil {
			return p.Explain(err, "checking whether peering user "+u.User+" retired")
		}
		if !retired {
			return fmt.Errorf("%w for cluster %q: user %s, valid until %s: run liqoctl delete peering-user --consumer-cluster-id %s first",
				ErrPeeringUserExists, u.ConsumerID, u.User, u.NotAfter.UTC().Format(time.RFC3339), u.ConsumerID)
		}
		p.Report.Info("Replacing peering user %s, retired (it authorizes nothing)", u.User)
	} else {
		p.Report.Info("Replacing peering user %s, expired at %s", u.User, u.NotAfter.UTC().Format(time.RFC3339))
	}
	return deletePeeringUserAccess(ctx, p, u.ConsumerID)
}

// AdvertisedServer is the API server URL and CA a consumer reaches this cluster with: the
// ones liqoctl install --api-server-url recorded, else the kubeconfig's.
func AdvertisedServer(ctx context.Context, s *Side) (string, []byte, error) {
	cfg, err := cluster.GetConfig(ctx, s.Client, s.Namespace)
	if err != nil {
		return "", nil, s.Explain(err, "reading the cluster configuration")
	}
	server, ca := cfg.APIServerURL, cfg.APIServerCA
	if server == "" {
		server = s.Config.Host
	}
	if len(ca) == 0 {
		ca = s.Config.CAData
		if len(ca) == 0 && s.Config.CAFile != "" {
			if ca, err = os.ReadFile(s.Config.CAFile); err != nil {
				return "", nil, fmt.Errorf("reading the API server CA: %w", err)
			}
		}
	}
	return server, ca, nil
}

// issueClientCertificate has the cluster's client signer issue a certificate for key, with
// CN user and O liqo.io, valid for ttl: a CertificateSigningRequest, approved by this
// administrator, removed once issued.
func issueClientCertificate(ctx context.Context, s *Side, key crypto.Signer, user string, ttl time.Duration) ([]byte, error) {
	request, err := authn.ForgeCSR(key, user)
	if err != nil {
		return nil, err
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: user + "-", Labels: map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.PeeringUserLabel: user}},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: request, SignerName: certificatesv1.KubeAPIServerClientSignerName,
			ExpirationSeconds: ptr.To(int32(ttl / time.Second)), Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
	}
	if createErr := s.Client.Create(ctx, csr); createErr != nil {
		return nil, s.Explain(createErr, "requesting the peering user's certificate")
	}
	defer func() { _ = s.Client.Delete(context.WithoutCancel(ctx), csr) }()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved,
		Status: "True", Reason: authv1beta1.ReasonLiqoPeeringUser, Message: "peering user generated by liqoctl"})
	if updateErr := s.Client.SubResource("approval").Update(ctx, csr); updateErr != nil {
		return nil, s.Explain(updateErr, "approving the peering user's certificate")
	}
	var certPEM []byte
	err = waitFor(ctx, s.Client, client.ObjectKeyFromObject(csr), &certificatesv1.CertificateSigningRequestList{}, "the signer to issue the peering user's certificate",
		func(c *certificatesv1.CertificateSigningRequest) (bool, string, error) {
			if c == nil {
				return false, "", fmt.Errorf("CertificateSigningRequest %s was deleted", csr.Name)
			}
			certPEM = c.Status.Certificate
			return len(certPEM) > 0, "approved, not issued: does this cluster run a signer for " + certificatesv1.KubeAPIServerClientSignerName + "?", nil
		})
	if err != nil {
		return nil, s.Explain(err, "waiting for the peering user's certificate")
	}
	return certPEM, nil
}

// peeringUsers lists the peering users of consumerID ("" for all). With exact, they are
// read from the tenant records, where GeneratePeeringUser
// records each before it grants anything and which only the administrator writes: a
// ClusterRole or ClusterRoleBinding writer can neither forge one nor hide one. Without,
// every ClusterRole and ClusterRoleBinding labelled as a peering user's counts too, for a
// removal to leave none behind.
func peeringUsers(ctx context.Context, s *Side, consumerID string, exact bool) ([]PeeringUser, error) {
	var records []*cluster.TenantRecord
	if consumerID == "" {
		all, err := cluster.ListTenantRecords(ctx, s.Client, s.Namespace)
		if err != nil {
			return nil, s.Explain(err, "listing peering users")
		}
		records = all
	} else if rec, err := cluster.GetTenantRecord(ctx, s.Client, s.Namespace, consumerID); err != nil {
		return nil, s.Explain(err, "reading the peering user of "+consumerID)
	} else if rec != nil {
		records = append(records, rec)
	}
	var out []PeeringUser
	seen := map[string]bool{}
	add := func(id, user, serial string, notAfter time.Time) {
		if seen[user] || (consumerID != "" && id != consumerID) {
			return
		}
		seen[user] = true
		out = append(out, PeeringUser{ConsumerID: id, User: user, Namespace: wire.TenantNamespaceName(id), Serial: serial, NotAfter: notAfter})
	}
	for _, rec := range records {
		if u := rec.PeeringUser; u != nil {
			add(rec.RemoteID, u.User, u.Serial, u.NotAfter)
		}
	}
	if !exact {
		opts := client.MatchingLabels{wire.ManagedByLabel: wire.ManagedByValue}
		for _, list := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
			if err := s.Client.List(ctx, list, opts, client.HasLabels{wire.PeeringUserLabel}); err != nil {
				return nil, s.Explain(err, "listing peering users")
			}
			_ = meta.EachListItem(list, func(o runtime.Object) error {
				obj := o.(client.Object)
				notAfter, _ := time.Parse(time.RFC3339, obj.GetAnnotations()[wire.PeeringUserExpiresAnnotation])
				add(obj.GetLabels()[wire.RemoteClusterIDLabel], obj.GetLabels()[wire.PeeringUserLabel], obj.GetAnnotations()[wire.PeeringUserSerialAnnotation], notAfter)
				return nil
			})
		}
	}
	slices.SortFunc(out, func(a, b PeeringUser) int { return strings.Compare(a.ConsumerID, b.ConsumerID) })
	return out, nil
}

// ListPeeringUsers lists the peering users of the cluster, as its tenant records hold them,
// each live one marked Retired when it authorizes nothing any more (asked with
// SubjectAccessReviews; with credentials that may not ask them, none is marked).
func ListPeeringUsers(ctx context.Context, s *Side, now time.Time) ([]PeeringUser, error) {
	users, err := peeringUsers(ctx, s, "", true)
	if err != nil {
		return nil, err
	}
	for i := range users {
		if !now.Before(users[i].NotAfter) {
			continue
		}
		retired, err := peeringUserRetired(ctx, s, users[i])
		if apierrors.IsForbidden(err) {
			break
		}
		if err != nil {
			return nil, s.Explain(err, "checking whether peering user "+users[i].User+" retired")
		}
		users[i].Retired = retired
	}
	return users, nil
}

// ListPeeringUserGrants lists the peering users of the cluster and, besides, every user
// some ClusterRole or ClusterRoleBinding is labelled as a peering user's: what a removal
// must leave none of.
func ListPeeringUserGrants(ctx context.Context, s *Side) ([]PeeringUser, error) {
	return peeringUsers(ctx, s, "", false)
}

// DeletePeeringUser removes the peering user of consumerID and proves, with
// SubjectAccessReviews and a scan of every binding, that its certificate authorizes
// nothing any more; it then says until when that certificate stays cryptographically
// valid. A new peering user gets another name: it never revives this one. With none left,
// it says so and returns nil: there is nothing to remove.
func DeletePeeringUser(ctx context.Context, p *Side, consumerID string) (*PeeringUser, error) {
	users, err := peeringUsers(ctx, p, consumerID, false)
	if err != nil {
		return nil, err
	}
	if len(users) == 0 {
		// Already gone (a re-run): the rule of every removal, CheckKnownPeer.
		p.Report.Info("Cluster %q has no peering user: nothing to remove", consumerID)
		return nil, nil
	}
	if err := deletePeeringUserAccess(ctx, p, consumerID); err != nil {
		return nil, err
	}
	p.Report.Info("Roles and bindings of peering user %s removed", users[0].User)
	for _, u := range users {
		// The roles and bindings were deleted a moment ago: the authorizer may not have seen
		// it yet.
		left, err := revocation.Settled(ctx, revocation.AuthorizerLag, func(ctx context.Context) ([]string, error) {
			left, err := peeringUserAllowed(ctx, p, u.User, consumerID)
			if err != nil {
				return nil, err
			}
			bindings, err := revocation.BindingsNaming(ctx, p.Client, u.User, nil)
			if err != nil {
				return nil, err
			}
			for _, b := range bindings {
				left = append(left, "named by "+b.String())
			}
			return left, nil
		})
		if err != nil {
			return nil, p.Explain(err, "verifying the revocation")
		}
		if len(left) > 0 {
			return nil, fmt.Errorf("%w: peering user %s may still: %s", ErrAccessNotRevoked, u.User, strings.Join(left, "; "))
		}
		if err := forgetPeeringUser(ctx, p, consumerID, u.User); err != nil {
			return nil, err
		}
		p.Report.Info("Access of peering user %s revoked: verified", u.User)
		if now := time.Now(); now.Before(u.NotAfter) {
			p.Report.Warn("Its certificate %s stays cryptographically valid until %s, but authorizes nothing: a new peering user gets another name and never revives it",
				u.Serial, u.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	return &users[0], nil
}

// forgetPeeringUser takes user, whose access is proven revoked, out of the tenant record of
// consumerID (a record that is gone holds nothing to forget).
func forgetPeeringUser(ctx context.Context, p *Side, consumerID, user string) error {
	err := cluster.UpdateTenantRecord(ctx, p.Client, p.Client, p.Namespace, consumerID, false, func(rec *cluster.TenantRecord) error {
		if rec.PeeringUser != nil && rec.PeeringUser.User == user {
			rec.PeeringUser = nil
		}
		return nil
	})
	if err != nil && !errors.Is(err, cluster.ErrTenantNamespaceNotFound) {
		return p.Explain(err, "forgetting the peering user")
	}
	return nil
}

// deletePeeringUserAccess deletes the roles and bindings of the peering users of consumerID.
func deletePeeringUserAccess(ctx context.Context, p *Side, consumerID string) error {
	sel := []client.DeleteAllOfOption{client.MatchingLabels{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: consumerID},
		client.HasLabels{wire.PeeringUserLabel}}
	for _, ns := range []string{wire.TenantNamespaceName(consumerID), p.Namespace} {
		for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &rbacv1.Role{}} {
			if err := p.Client.DeleteAllOf(ctx, obj, append(sel, client.InNamespace(ns))...); client.IgnoreNotFound(err) != nil {
				return p.Explain(err, "deleting the peering user's roles")
			}
		}
	}
	for _, obj := range []client.Object{&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRole{}} {
		if err := p.Client.DeleteAllOf(ctx, obj, sel...); err != nil && !apierrors.IsNotFound(err) {
			return p.Explain(err, "deleting the peering user's cluster role")
		}
	}
	return nil
}
