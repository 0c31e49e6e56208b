package handshake

import (
	"context"
	"crypto"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Controllers is whose controllers handle the protocol on a side, and what the CLI does
// differently because of it: this project's (liqo-auth-manager, or in-process), or
// Liqo's own (liqo-controller-manager), of which liqoctl is only a client. A Side with no
// Controllers has this project's.
type Controllers interface {
	// Liqo reports whether they are Liqo's: liqoctl then starts none of its own there,
	// keeps no record of its own and waits only for what the wire contract promises.
	Liqo() bool
	// String says whose they are and what showed it, for messages.
	String() string
	// EnsureTenantNamespace makes (or keeps) the tenant namespace of remoteID on s, and says
	// whether it made it now (nothing is in it yet). readIn, when not nil, may run in the
	// namespace beside the reads that check an existing one: the result says whether it
	// did (and what it read counts).
	EnsureTenantNamespace(ctx context.Context, s *Side, remoteID string, readIn ReadIn) (EnsuredNamespace, error)
	// TenantNamespace finds the tenant namespace of remoteID on s.
	TenantNamespace(ctx context.Context, s *Side, remoteID string) (string, error)
	// TenantNamespaces are the designated tenant namespaces on s, each with its peer:
	// what readers across the cluster (info, verify) keep objects from.
	TenantNamespaces(ctx context.Context, s *Side) (cluster.TenantNamespaces, error)
	// Record is this cluster's tenant record of remoteID on s (nil: none, or Liqo's
	// controllers, which keep none; also nil when the credentials may not read it).
	Record(ctx context.Context, s *Side, remoteID string) (*cluster.TenantRecord, error)
	// WaitTenant waits on provider s for the answer to the Tenant t of consumer consumerID
	// with public key pub: a certificate valid at validAt. t is the Tenant as this command
	// applied it, and the wait starts from it.
	WaitTenant(ctx context.Context, s *Side, t *authv1beta1.Tenant, pub crypto.PublicKey, consumerID string, validAt time.Time) (*authv1beta1.Tenant, error)
	// WaitIdentity waits on consumer s until the Identity id holds the certificate
	// signedCRT (serial, hexadecimal) in a kubeconfig. id is the Identity as this command
	// applied it, and the wait starts from it.
	WaitIdentity(ctx context.Context, s *Side, id *authv1beta1.Identity, signedCRT []byte, serial string) (*authv1beta1.Identity, error)
}

// ReadIn reads what its caller needs in tenant namespace ns, keeping its outcome itself.
type ReadIn func(ctx context.Context, ns string)

// EnsuredNamespace is a tenant namespace Controllers.EnsureTenantNamespace made or kept.
type EnsuredNamespace struct {
	// Name of the namespace.
	Name string
	// Created says it was made now: nothing is in it yet.
	Created bool
	// Read says the ReadIn given ran in it, beside the reads that checked it.
	Read bool
}

// LiqoAuthControllers are this project's controllers.
type LiqoAuthControllers struct{}

// LiqoControllers are Liqo's own; Evidence says what showed they run (the Deployment
// found, or the flag that said so).
type LiqoControllers struct{ Evidence string }

var (
	_ Controllers = LiqoAuthControllers{}
	_ Controllers = LiqoControllers{}
)

// Liqo is false: these are this project's controllers.
func (LiqoAuthControllers) Liqo() bool { return false }

func (LiqoAuthControllers) String() string {
	return "liqo-auth-manager (or liqoctl's in-process controllers)"
}

// EnsureTenantNamespace makes the namespace and records it in the Liqo namespace: the
// administrator's act that makes it one. Adopting a namespace this cluster had not recorded
// (only with AdoptTenantNamespace) is said aloud.
func (LiqoAuthControllers) EnsureTenantNamespace(ctx context.Context, s *Side, remoteID string, readIn ReadIn) (EnsuredNamespace, error) {
	tn, err := cluster.EnsureTenantNamespaceReading(ctx, s.Client, s.Namespace, remoteID, s.AdoptTenantNamespace, readIn)
	if err != nil {
		return EnsuredNamespace{}, s.Explain(err, "ensuring the tenant namespace")
	}
	if tn.Adopted {
		s.Report.Warn("Namespace %s, which existed without this cluster's record, is adopted as the tenant namespace of %q", tn.Name, remoteID)
	}
	if tn.DesignatedBy != "" {
		s.Report.Info("Namespace %s, which existed without this cluster's record, is recorded as the tenant namespace of %q: %q made it so, and may make tenant records (a run cut off before it recorded the namespace?)", tn.Name, remoteID, tn.DesignatedBy)
	}
	s.noteRecord(remoteID, tn.Record)
	return EnsuredNamespace{Name: tn.Name, Created: tn.Created, Read: tn.ReadIn}, nil
}

// TenantNamespace is the namespace the tenant record names.
func (LiqoAuthControllers) TenantNamespace(ctx context.Context, s *Side, remoteID string) (string, error) {
	return cluster.GetTenantNamespace(ctx, s.Client, s.Namespace, remoteID)
}

// TenantNamespaces are those the tenant records name, still the recorded namespaces.
func (LiqoAuthControllers) TenantNamespaces(ctx context.Context, s *Side) (cluster.TenantNamespaces, error) {
	return cluster.DesignatedTenantNamespaces(ctx, s.Client, s.Namespace)
}

// Record reads the tenant record.
func (LiqoAuthControllers) Record(ctx context.Context, s *Side, remoteID string) (*cluster.TenantRecord, error) {
	rec, err := cluster.GetTenantRecord(ctx, s.Client, s.Namespace, remoteID)
	if apierrors.IsForbidden(err) {
		return nil, nil
	}
	return rec, err
}

// WaitTenant waits for the acceptance and a certificate the provider's record says it
// published.
func (LiqoAuthControllers) WaitTenant(ctx context.Context, s *Side, t *authv1beta1.Tenant, _ crypto.PublicKey, _ string, validAt time.Time) (*authv1beta1.Tenant, error) {
	return WaitTenant(ctx, s, t, validAt)
}

// WaitIdentity waits for the Identity's Ready condition and the certificate's serial.
func (LiqoAuthControllers) WaitIdentity(ctx context.Context, s *Side, id *authv1beta1.Identity, _ []byte, serial string) (*authv1beta1.Identity, error) {
	return WaitIdentity(ctx, s, id, serial)
}

// Liqo is true.
func (LiqoControllers) Liqo() bool { return true }

func (l LiqoControllers) String() string { return "Liqo's controllers (" + l.Evidence + ")" }

// EnsureTenantNamespace makes liqo-tenant-<remoteID> with the labels Liqo looks for.
// readIn is left to the caller.
func (LiqoControllers) EnsureTenantNamespace(ctx context.Context, s *Side, remoteID string, _ ReadIn) (EnsuredNamespace, error) {
	tn, err := cluster.EnsureLiqoTenantNamespace(ctx, s.Client, remoteID)
	if err != nil {
		return EnsuredNamespace{}, s.Explain(err, "ensuring the tenant namespace")
	}
	return EnsuredNamespace{Name: tn}, nil
}

// TenantNamespace finds the namespace as Liqo does, refusing more than one claimant.
func (LiqoControllers) TenantNamespace(ctx context.Context, s *Side, remoteID string) (string, error) {
	return cluster.FindLiqoTenantNamespace(ctx, s.Client, remoteID)
}

// TenantNamespaces are the liqo-tenant-<id> namespaces labelled for <id>.
func (LiqoControllers) TenantNamespaces(ctx context.Context, s *Side) (cluster.TenantNamespaces, error) {
	return cluster.LiqoTenantNamespaces(ctx, s.Client)
}

// Record is nil: Liqo keeps no tenant record.
func (LiqoControllers) Record(context.Context, *Side, string) (*cluster.TenantRecord, error) {
	return nil, nil
}

// WaitTenant waits for a certificate for the consumer's key, chaining to the CA published
// with it: all Liqo promises, since it writes no conditions.
func (LiqoControllers) WaitTenant(ctx context.Context, s *Side, t *authv1beta1.Tenant, pub crypto.PublicKey, consumerID string, validAt time.Time) (*authv1beta1.Tenant, error) {
	return WaitLiqoTenant(ctx, s, t, pub, consumerID, validAt)
}

// WaitIdentity waits for status.kubeconfigSecretRef, all Liqo's controllers write.
func (LiqoControllers) WaitIdentity(ctx context.Context, s *Side, id *authv1beta1.Identity, signedCRT []byte, _ string) (*authv1beta1.Identity, error) {
	return WaitLiqoIdentity(ctx, s, id, signedCRT)
}
