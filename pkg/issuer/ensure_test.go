package issuer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// Characterisation of Ensure (findOrCreate, approve, afterApproval and its defers), run on
// the code before and after the split.
func TestEnsureSteps(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	self := authenticationv1.UserInfo{Username: "system:serviceaccount:liqo:manager", UID: "self-uid"}
	owner := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "tn", Name: "cl-a", UID: "tenant-uid"}}
	s := Subject{Owner: owner, Annotation: "a", RemoteID: "cl-a", Request: []byte("req"), Reason: "R", Message: "M"}
	errBoom := errors.New("boom")
	foreignCSR := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "other",
		Labels: map[string]string{wire.TenantUIDLabel: "tenant-uid"}},
		Spec: certificatesv1.CertificateSigningRequestSpec{Username: "mallory", Request: []byte("x"), SignerName: certificatesv1.KubeAPIServerClientSignerName}}
	refusal := &Issuance{Reason: "Refused"}

	type result struct {
		reason    string
		hasIssue  bool
		foreign   int
		err       string
		checks    int
		approvals int
		waiting   int
	}
	cases := []struct {
		name       string
		listErr    error
		check      func(context.Context) (*Issuance, error)
		approveErr error
		sign       bool
		sigs       bool
		want       result
	}{
		{name: "list error", listErr: errBoom, want: result{err: "boom"}},
		{name: "refused", check: func(context.Context) (*Issuance, error) { return refusal, nil }, want: result{reason: "Refused", hasIssue: true, foreign: 1, checks: 1}},
		{name: "check error", check: func(context.Context) (*Issuance, error) { return nil, errBoom }, want: result{err: "boom", foreign: 1, checks: 1}},
		{name: "refused and error", check: func(context.Context) (*Issuance, error) { return refusal, errBoom }, want: result{reason: "Refused", hasIssue: true, err: "boom", foreign: 1, checks: 1}},
		{name: "approve error", approveErr: errBoom, want: result{err: "approving CertificateSigningRequest", foreign: 1, checks: 1, approvals: 1}},
		{name: "approve error with signatures", approveErr: errBoom, sigs: true, want: result{err: "approving CertificateSigningRequest", foreign: 1, checks: 1, approvals: 1}},
		{name: "pending", want: result{reason: authv1beta1.ReasonCertificatePending, hasIssue: true, foreign: 1, checks: 1, approvals: 1}},
		{name: "pending with signatures", sigs: true, want: result{reason: authv1beta1.ReasonCertificatePending, hasIssue: true, foreign: 1, checks: 1, approvals: 1}},
		{name: "signed while waiting", sigs: true, sign: true, want: result{reason: authv1beta1.ReasonIssuedCertificateBroken, hasIssue: true, foreign: 1, checks: 1, approvals: 1}},
		{name: "signed without signatures", sign: true, want: result{reason: authv1beta1.ReasonCertificatePending, hasIssue: true, foreign: 1, checks: 1, approvals: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got result
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(foreignCSR.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if tc.listErr != nil {
						return tc.listErr
					}
					return cl.List(ctx, list, opts...)
				},
				Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
						csr.Spec.Username, csr.Spec.UID = self.Username, self.UID
					}
					return cl.Create(ctx, obj, opts...)
				},
				SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					got.approvals++
					if sub != "approval" {
						t.Errorf("subresource %q", sub)
					}
					if tc.approveErr != nil {
						return tc.approveErr
					}
					stored := &certificatesv1.CertificateSigningRequest{}
					if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
						return err
					}
					stored.Status.Conditions = obj.(*certificatesv1.CertificateSigningRequest).Status.Conditions
					if tc.sign {
						stored.Status.Certificate = []byte("not a certificate")
					}
					return cl.Status().Update(ctx, stored)
				},
			}).WithStatusSubresource(&certificatesv1.CertificateSigningRequest{}).Build()
			i := &Issuer{Client: c, APIReader: c, Self: self, Lifetime: time.Hour, CSRTimeout: time.Minute, SignerWait: 10 * time.Millisecond}
			if tc.sigs {
				i.Signatures = NewSignatures()
			}
			check := tc.check
			if check == nil {
				check = func(context.Context) (*Issuance, error) { return nil, nil }
			}
			is, foreign, err := i.Ensure(context.Background(), s, now, func(ctx context.Context) (*Issuance, error) {
				got.checks++
				return check(ctx)
			})
			if is != nil {
				got.hasIssue, got.reason = true, is.Reason
			}
			got.foreign = len(foreign)
			if err != nil {
				got.err = tc.want.err
				if !strings.Contains(err.Error(), tc.want.err) || !errors.Is(err, errBoom) {
					t.Errorf("err = %v", err)
				}
			}
			if i.Signatures != nil {
				got.waiting = len(i.Signatures.waiting)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

var _ = corev1.ConditionTrue
