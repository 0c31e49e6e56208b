// Package handshake holds the steps of the two-cluster protocol as the CLI drives them:
// idempotent Ensure* steps that create or repair one object, pure Forge* builders, and
// Wait* steps that watch an object until the other side's controllers have done their
// part. Each step reports on the side it acts on, "(local)" or "(remote)".
package handshake

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Reporter prints the progress of one side.
type Reporter interface {
	Info(format string, args ...any)
	Warn(format string, args ...any)
}

// Side is one cluster of the handshake, as seen by the CLI.
type Side struct {
	// Scope is how output names this side: Local or Remote ("" for a one-cluster command).
	Scope string
	// Client talks to the cluster with the user's credentials.
	Client client.WithWatch
	// Config is the client configuration behind Client.
	Config *rest.Config
	// HTTPClient and Mapper are Client's connection and API discovery, which the
	// in-process controllers share (optional).
	HTTPClient *http.Client
	Mapper     meta.RESTMapper
	// Namespace is the Liqo namespace.
	Namespace string
	// ClusterID of the cluster, read by Identify.
	ClusterID string
	// Report prints progress for this side.
	Report Reporter
	// AdoptTenantNamespace lets EnsureTenantNamespace adopt an existing namespace this
	// cluster has no record of (the administrator says it is theirs).
	AdoptTenantNamespace bool
	// ManagerRunning says that a liqo-auth-manager held its Lease on this cluster when the
	// command looked (authmanager.InProcess.Start sets it): a Tenant applied here then
	// carries the manager's finalizer from its creation (ApplyTenant), which saves the
	// manager a write and a reconcile per handshake. Never set where in-process controllers
	// decide: a refused Tenant would keep a finalizer nobody removes once the command ends.
	ManagerRunning bool
	// controllers is whose controllers handle the protocol on this side (nil: this
	// project's).
	controllers Controllers
	// peeringUser is the peering user the side's credentials are, if they are one: its
	// refusals are explained as the peering user being gone or expired.
	peeringUser *peeringUserCert

	keyMu sync.Mutex
	keys  *cluster.KeySet

	uidOnce sync.Once
	uid     string
	uidErr  error

	recordMu sync.Mutex
	// records are the tenant records read as the tenant namespaces were ensured (nil:
	// none), by remote cluster ID.
	records map[string]*cluster.TenantRecord
}

// noteRecord keeps the tenant record rec of remoteID (nil: none), as EnsureTenantNamespace
// read it.
func (s *Side) noteRecord(remoteID string, rec *cluster.TenantRecord) {
	s.recordMu.Lock()
	defer s.recordMu.Unlock()
	if s.records == nil {
		s.records = map[string]*cluster.TenantRecord{}
	}
	s.records[remoteID] = rec
}

// notedRecord is the tenant record of remoteID read when this command ensured its tenant
// namespace (nil: there was none), and whether it did. Only the administrator and the
// manager write a record, and neither takes back in the course of a command what a reader
// of it (a CA pin, the state, what was published) relies on: a later step that needs what
// the manager writes meanwhile reads it anew.
func (s *Side) notedRecord(remoteID string) (*cluster.TenantRecord, bool) {
	s.recordMu.Lock()
	defer s.recordMu.Unlock()
	rec, ok := s.records[remoteID]
	return rec, ok
}

// ClusterKey reads the cluster's key pair once per command: it never changes while a
// command runs, and several steps need it.
func (s *Side) ClusterKey(ctx context.Context) (crypto.Signer, error) {
	ks, err := s.ClusterKeys(ctx)
	if err != nil {
		return nil, err
	}
	return ks.Current, nil
}

// ClusterKeys reads the cluster's key set (the current key, and around a rotation the
// staged and the previous one) once per command, in the same read as ClusterKey.
func (s *Side) ClusterKeys(ctx context.Context) (cluster.KeySet, error) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if s.keys == nil {
		ks, err := cluster.GetClusterKeys(ctx, s.Client, s.Namespace)
		if err != nil {
			return cluster.KeySet{}, s.Explain(err, "reading the cluster key")
		}
		s.keys = &ks
	}
	return *s.keys, nil
}

// Identify reads the cluster ID of the side, with an error that says what to do when the
// cluster is not installed.
func (s *Side) Identify(ctx context.Context) error {
	get := cluster.GetClusterID
	if s.peeringUser != nil {
		get = cluster.GetClusterIDByName // a peering user may not list ConfigMaps
	}
	id, err := get(ctx, s.Client, s.Namespace)
	if err != nil {
		return s.Explain(err, "reading its cluster ID")
	}
	s.ClusterID = id
	return nil
}

// identified reads the cluster ID of the side unless it is known already (Identify).
func (s *Side) identified(ctx context.Context) error {
	if s.ClusterID != "" {
		return nil
	}
	return s.Identify(ctx)
}

// Unreachable reports whether err says the API server could not be reached at all.
func Unreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var urlErr *url.Error
	return errors.As(err, &opErr) || errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dnsErr) ||
		(errors.As(err, &urlErr) && urlErr.Timeout())
}

func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// Explain turns low-level errors into a sentence naming the side and the way out.
func (s *Side) Explain(err error, doing string) error {
	switch {
	case errors.Is(err, cluster.ErrNotInstalled):
		return fmt.Errorf("%s%s: %w: run liqoctl install on this cluster first", s.prefix(), doing, err)
	case meta.IsNoMatchError(err):
		return fmt.Errorf("%s%s: the authentication.liqo.io CRDs are not installed: run liqoctl install on this cluster first", s.prefix(), doing)
	case IsQuotaExceeded(err) && s.peeringUser != nil:
		return fmt.Errorf("%s%s: %w: a ResourceQuota of the namespace is full: ask the provider's administrator to make room in it, then re-run the command", s.prefix(), doing, err)
	case IsQuotaExceeded(err):
		return fmt.Errorf("%s%s: %w: a ResourceQuota of the namespace is full: remove what does not belong there or raise the quota, then re-run the command", s.prefix(), doing, err)
	case s.peeringUser != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)):
		return fmt.Errorf("%s%s: %w", s.prefix(), doing, &PeeringUserRefusal{msg: s.peeringUser.explain(err, time.Now()), err: err})
	case Unreachable(err):
		host := ""
		if s.Config != nil {
			host = " at " + s.Config.Host
		}
		return fmt.Errorf("%s%s: cannot reach the API server%s (%w): check the kubeconfig and that the cluster runs, then re-run the command: it resumes where it stopped", s.prefix(), doing, host, rootCause(err))
	}
	return fmt.Errorf("%s%s: %w", s.prefix(), doing, err)
}

// IsQuotaExceeded says whether err is the API server's refusal of a write that a
// ResourceQuota of its namespace has no room for: the ResourceQuota admission plugin's
// own wording (`<resource> "<name>" is forbidden: exceeded quota: ...`), not any refusal
// that mentions a quota (a webhook's or a policy's message, prefixed by its own, is its
// writer's choice).
func IsQuotaExceeded(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Reason != metav1.StatusReasonForbidden {
		return false
	}
	m := st.Status().Message
	i := strings.Index(m, " is forbidden: exceeded quota: ")
	return i > 0 && !strings.Contains(m[:i], ": ")
}

// prefix is how an error names the side: "(local) ", or nothing for a one-cluster command.
func (s *Side) prefix() string { return scopePrefix(s.Scope) }

// unscoped is err's message without this side's prefix, for a progress line (which
// names the side itself).
func (s *Side) unscoped(err error) string {
	return strings.TrimPrefix(err.Error(), s.prefix())
}

// Errorf is an error of this side: the message named as its progress lines are,
// "(local) ..." or "(remote) ...", or bare for a one-cluster command. Errors are written
// through it (or Explain), never with a hand-typed prefix.
func (s *Side) Errorf(format string, args ...any) error {
	return ScopedErrorf(s.Scope, format, args...)
}

// Controllers says whose controllers handle the protocol on this side.
func (s *Side) Controllers() Controllers {
	if s.controllers == nil {
		return LiqoAuthControllers{}
	}
	return s.controllers
}

// SetControllers says whose controllers handle the protocol on this side.
func (s *Side) SetControllers(c Controllers) { s.controllers = c }

// EnsureTenantNamespace makes (or keeps) the tenant namespace of remoteID on this side, as
// its controllers expect it.
func (s *Side) EnsureTenantNamespace(ctx context.Context, remoteID string) (string, error) {
	tn, err := s.Controllers().EnsureTenantNamespace(ctx, s, remoteID, nil)
	return tn.Name, err
}

// TenantNamespace returns the tenant namespace of remoteID on this side.
func (s *Side) TenantNamespace(ctx context.Context, remoteID string) (string, error) {
	return s.Controllers().TenantNamespace(ctx, s, remoteID)
}

// The scopes of a two-cluster command: its progress lines and errors name the side they
// are about with these.
const (
	// Local is the cluster of --kubeconfig (the consumer of authenticate).
	Local = "local"
	// Remote is the cluster of --remote-kubeconfig (the provider of authenticate).
	Remote = "remote"
)

// ScopedErrorf is an error about side scope when no Side is at hand yet (connecting,
// starting its controllers): "(local) ..." or "(remote) ...", bare for scope "".
func ScopedErrorf(scope, format string, args ...any) error {
	return fmt.Errorf(scopePrefix(scope)+format, args...)
}

// scopePrefix is how an error names a side: "(local) ", or nothing for a one-cluster
// command.
func scopePrefix(scope string) string {
	if scope == "" {
		return ""
	}
	return "(" + scope + ") "
}
