package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// floor is what the building blocks of a handshake cost alone on this machine: one API
// call of each kind over a warm connection, and one certificate from the signer.
type floor struct {
	name  string
	times []time.Duration
}

// floorRounds times, against the provider with no manager running, a read, a write, a
// SubjectAccessReview, a Tenant status write (a custom resource, the largest object of
// the handshake) and the CSR signer (create, approve, certificate seen by a watch).
func (e *env) floorRounds(ctx context.Context) ([]floor, error) {
	c := e.pc
	ns := "liqo-auth-floor"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	defer func() { _ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) }()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "floor", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx, cm); err != nil {
		return nil, err
	}
	key, err := authn.GenerateKey(authn.Ed25519)
	if err != nil {
		return nil, err
	}
	csrPEM, err := authn.ForgeCSR(key, "cl-floor")
	if err != nil {
		return nil, err
	}
	t := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "cl-floor", Namespace: ns}, Spec: authv1beta1.TenantSpec{ClusterID: "cl-floor", CSR: csrPEM}}
	if err := c.Create(ctx, t); err != nil {
		return nil, err
	}
	steps := []struct {
		name string
		do   func(i int) error
	}{
		{"GET a ConfigMap", func(int) error { return c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}) }},
		{"create a Secret", func(i int) error {
			return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("floor-%d", i), Namespace: ns}, StringData: map[string]string{"k": "v"}})
		}},
		{"SubjectAccessReview", func(int) error {
			return c.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "cl-floor", Groups: []string{"liqo.io"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets"}}})
		}},
		{"update a Tenant's status", func(i int) error {
			meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: "Floor", Status: metav1.ConditionTrue, Reason: "Round", Message: fmt.Sprint(i)})
			return c.Status().Update(ctx, t)
		}},
		{"CSR signed (create, approve, certificate seen)", func(i int) error { return e.signOnce(ctx, csrPEM, i) }},
	}
	var out []floor
	for _, s := range steps {
		f := floor{name: s.name}
		for i := 0; i < e.cfg.rounds+3; i++ {
			start := time.Now()
			if err := s.do(i); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			if i >= 3 { // the first rounds warm up
				f.times = append(f.times, time.Since(start))
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// signOnce has the cluster's client signer issue a certificate for csrPEM, as the
// provider does: create, approve, wait for the certificate with a watch.
func (e *env) signOnce(ctx context.Context, csrPEM []byte, i int) error {
	c := e.pc
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("liqo-auth-floor-%d-%d", time.Now().UnixNano(), i)},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM, SignerName: certificatesv1.KubeAPIServerClientSignerName,
			ExpirationSeconds: ptr.To[int32](3600), Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
	}
	if err := c.Create(ctx, csr); err != nil {
		return err
	}
	defer func() { _ = c.Delete(context.Background(), csr) }()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Floor", Message: "benchmark"})
	if err := c.SubResource("approval").Update(ctx, csr); err != nil {
		return err
	}
	w, err := c.Watch(ctx, &certificatesv1.CertificateSigningRequestList{}, client.MatchingFields{"metadata.name": csr.Name},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: csr.ResourceVersion}})
	if err != nil {
		return err
	}
	defer w.Stop()
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch on CSR %s closed", csr.Name)
			}
			if got, isCSR := ev.Object.(*certificatesv1.CertificateSigningRequest); isCSR && len(got.Status.Certificate) > 0 {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("CSR %s was not signed within a minute", csr.Name)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// idleRSS is a liqo-auth-manager's resident memory with nothing to do.
type idleRSS struct {
	total, anon, file float64 // MiB
}

// idleManager starts a manager on the provider, which has no tenant, and reads its
// resident memory once it has settled.
func (e *env) idleManager() (*idleRSS, error) {
	m, err := e.startManager(e.provider)
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	time.Sleep(5 * time.Second)
	r := &idleRSS{}
	for _, l := range strings.Split(readFile(fmt.Sprintf("/proc/%d/status", m.Pid())), "\n") {
		var kb float64
		for key, into := range map[string]*float64{"VmRSS:": &r.total, "RssAnon:": &r.anon, "RssFile:": &r.file} {
			if _, err := fmt.Sscanf(l, key+" %f kB", &kb); err == nil {
				*into = kb / 1024
			}
		}
	}
	return r, nil
}
