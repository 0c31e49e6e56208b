// Package key is liqoctl rotate key: replace this cluster's key pair, moving its identity
// with every provider to the new key before the old one is retired (protocol.md, "11. Key
// rotation"). With a liqo-auth-manager in the cluster, the command asks it (annotation
// liqo-auth.io/rotate-key on the authentication-keys Secret) and follows its progress;
// without one, it drives the rotation itself. Either way an interrupted rotation resumes.
package key

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/rotation"
)

// ProviderRecheck is how long the in-process driver waits, without a change on this
// cluster, before asking the providers again: their answers are Renews on other clusters,
// which it does not watch.
const ProviderRecheck = 5 * time.Second

// Options of liqoctl rotate key.
type Options struct {
	Global    *cli.Global
	NoWait    bool
	Algorithm string
	Timeout   cli.Timeout

	side *handshake.Side
}

// NewCmd returns the rotate key command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Replace this cluster's key, moving its identity with every provider first",
		Long: `Stages a new key, obtains from every liqo-auth provider a certificate for it over the existing
identity (proving possession of both keys), switches to it, and retires the old key once every
peer moved and every old certificate was proven to authorize nothing. Each peer's progress is
printed on stderr. A peer that cannot move (a Liqo provider, an unreachable one) is named with
what its administrator runs; the old key stays until it moved. Interrupted, the rotation resumes
where it stopped: run the command again (a liqo-auth-manager resumes it by itself).`,
		Example: `  liqoctl rotate key
  liqoctl rotate key --no-wait   # ask the manager, and follow with liqoctl info`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(cmd.Context()); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.NoWait, "no-wait", false, "stage the key (or resume) and return without waiting for the rotation to end")
	cmd.Flags().StringVar(&o.Algorithm, "key-algorithm", string(authn.Ed25519), "algorithm of the new key: "+string(authn.Ed25519)+" or "+string(authn.RSA2048))
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Complete connects to the cluster.
func (o *Options) Complete(ctx context.Context) error {
	s, err := o.Global.LocalSide(ctx, "")
	if err != nil {
		return err
	}
	o.side = s
	return s.Identify(ctx)
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if _, err := authn.GenerateKey(authn.Algorithm(o.Algorithm)); err != nil {
		return err
	}
	return nil
}

// Run stages (or resumes) and drives or follows the rotation.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s := o.side
	ks, err := cluster.GetClusterKeys(ctx, s.Client, s.Namespace)
	if err != nil {
		return s.Explain(err, "reading the cluster's keys")
	}
	if ks.Next != nil {
		fp, _ := authn.Fingerprint(ks.Next.Public())
		s.Report.Info("A rotation is under way: resuming it, to the staged key %s", fp)
	} else if ks.Rotating() {
		s.Report.Info("A rotation is under way (the previous key is not retired yet): resuming it")
	}
	running, err := authmanager.RunningManager(ctx, s.Client, s.Namespace, o.Global.Clock())
	if err != nil {
		return s.Explain(err, "looking for a running liqo-auth-manager")
	}
	if running != nil {
		err = o.askManager(ctx)
	} else {
		err = o.drive(ctx)
	}
	return o.explainEnd(ctx, err)
}

// explainEnd says what an interrupted rotation does.
func (o *Options) explainEnd(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ctx.Err())) {
		return o.side.Errorf("the rotation was interrupted (%v): nothing is lost, it resumes where it stopped with liqoctl rotate key (or by itself where a liqo-auth-manager runs); liqoctl info shows each peer's progress", ctx.Err())
	}
	return err
}

// askManager sets the rotate-key annotation (a token not yet rotated) and follows the
// keys Secret until the manager answers it with key-rotated.
func (o *Options) askManager(ctx context.Context) error {
	s := o.side
	var sec corev1.Secret
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: wire.KeysSecretName}, &sec); err != nil {
		return s.Explain(err, "reading the cluster's keys")
	}
	token := sec.Annotations[wire.RotateKeyAnnotation]
	if token == "" || token == sec.Annotations[wire.KeyRotatedAnnotation] {
		token = strconv.FormatInt(o.Global.Clock().UnixNano(), 10)
		orig := sec.DeepCopy()
		if sec.Annotations == nil {
			sec.Annotations = map[string]string{}
		}
		sec.Annotations[wire.RotateKeyAnnotation] = token
		if err := s.Client.Patch(ctx, &sec, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return s.Explain(err, "asking liqo-auth-manager to rotate the key")
		}
	}
	s.Report.Info("liqo-auth-manager runs in this cluster: it rotates the key (request %s)", token)
	if o.NoWait {
		s.Report.Info("Not waiting: liqoctl info shows each peer's progress")
		return nil
	}
	w, err := s.Client.Watch(ctx, &corev1.SecretList{}, client.InNamespace(s.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", wire.KeysSecretName)})
	if err != nil {
		return s.Explain(err, "following the rotation")
	}
	defer w.Stop()
	p := o.printer()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return s.Errorf("following the rotation: the watch ended; run liqoctl rotate key again to follow it")
			}
			if ev.Type == watch.Error {
				continue
			}
			if cur, isSecret := ev.Object.(*corev1.Secret); isSecret && cur.Annotations[wire.KeyRotatedAnnotation] == token {
				s.Report.Info("The key is rotated: the previous key is retired")
				return nil
			}
			p.observe(ctx, o.driver())
		}
	}
}

// drive runs the rotation in this process: stage, then a step at each change.
func (o *Options) drive(ctx context.Context) error {
	s := o.side
	s.Report.Info("No liqo-auth-manager runs in this cluster: this command drives the rotation")
	d := o.driver()
	if _, err := d.Stage(ctx); err != nil {
		if errors.Is(err, cluster.ErrRotationUnfinished) {
			return s.Errorf("%w: run liqoctl rotate key again once every peer moved (liqoctl info names those that did not)", err)
		}
		return s.Explain(err, "staging the new key")
	}
	// The identity controller writes the kubeconfig of each new certificate, the tenant
	// controller re-seals the Tenants this cluster accepted: both follow the keys as they
	// change (staged, switched, retired).
	ctrls := authmanager.NewInProcess(o.Global)
	ctrls.LiveKeys = true
	defer ctrls.Stop()
	if err := ctrls.Ensure(ctx, authmanager.SideRole{Side: s, Role: authmanager.Both}); err != nil {
		return err
	}
	p := o.printer()
	for {
		st, err := d.Step(ctx)
		if err != nil {
			return s.Explain(err, "rotating the key")
		}
		p.print(st)
		if st.Phase == rotation.Retired || st.Phase == rotation.Idle {
			s.Report.Info("The key is rotated: the previous key is retired")
			return nil
		}
		if st.Stuck() {
			return o.stuck(st)
		}
		if o.NoWait && st.Phase == rotation.Switched {
			s.Report.Info("Not waiting: the key is switched; run liqoctl rotate key again to retire the previous one once every peer moved")
			return nil
		}
		if err := o.waitChange(ctx); err != nil {
			return err
		}
	}
}

// stuck ends a rotation that only blocked peers hold: it names them, with what their
// administrators run; the previous key stays.
func (o *Options) stuck(st rotation.Status) error {
	var names []string
	for _, p := range st.Blocked() {
		names = append(names, p.Peer)
	}
	return o.side.Errorf("the key is switched but the previous one is kept: provider(s) %s cannot move (each line above says what its administrator runs); run liqoctl rotate key again once they can, to move them and retire the previous key",
		strings.Join(names, ", "))
}

// waitChange returns at the next change of an Identity of this cluster, or after
// ProviderRecheck (the providers' answers are not watched).
func (o *Options) waitChange(ctx context.Context) error {
	w, err := o.side.Client.Watch(ctx, &authv1beta1.IdentityList{})
	if err != nil {
		return o.side.Explain(err, "following the Identities")
	}
	defer w.Stop()
	timer := time.NewTimer(ProviderRecheck)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Modified || ev.Type == watch.Deleted {
				return nil
			}
		}
	}
}

func (o *Options) driver() *rotation.Driver {
	s := o.side
	return &rotation.Driver{Client: s.Client, Namespace: s.Namespace, ClusterID: s.ClusterID, Algorithm: authn.Algorithm(o.Algorithm), Provider: true, Now: o.Global.Clock}
}

func (o *Options) printer() *printer {
	return &printer{report: o.side.Report, last: map[string]string{}}
}

// printer prints each peer's progress when it changed.
type printer struct {
	report handshake.Reporter
	last   map[string]string
	phase  rotation.Phase
}

func (p *printer) observe(ctx context.Context, d *rotation.Driver) {
	if st, err := d.Observe(ctx); err == nil {
		p.print(st)
	}
}

func (p *printer) print(st rotation.Status) {
	if st.Phase != p.phase {
		p.report.Info("Rotation: %s", st.Phase)
		p.phase = st.Phase
	}
	for _, peer := range st.Peers {
		line := peer.String()
		if p.last[peer.Peer] == line {
			continue
		}
		p.last[peer.Peer] = line
		if peer.State == rotation.CannotMove {
			p.report.Warn("Provider %s", line)
		} else {
			p.report.Info("Provider %s", line)
		}
	}
	if w := st.Waiting(); w != "" && p.last[""] != w {
		p.last[""] = w
		p.report.Info("Waiting for: %s", w)
	}
}
