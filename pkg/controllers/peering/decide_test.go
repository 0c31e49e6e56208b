package peering

import (
	"context"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// checkName is the name of a bootstrap check, "checkKubeconfig".
func checkName(check func(*input) *verdict) string {
	name := runtime.FuncForPC(reflect.ValueOf(check).Pointer()).Name()
	return name[strings.LastIndex(name, ".")+1:]
}

// TestBootstrapChecksInOrder pins the order of the checks: what the credential is before
// whom it is for, and that before whether it was used. A reordering changes what a
// Peering says, and which check may read what (a check after checkKubeconfig reads the
// certificate).
func TestBootstrapChecksInOrder(t *testing.T) {
	want := []string{"checkSecretPresent", "checkKubeconfig", "checkPeeringUser", "checkIssuedForThisCluster", "checkNotExpired", "checkCAPin", "checkNotConsumed"}
	var got []string
	for _, c := range bootstrapChecks() {
		got = append(got, checkName(c))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("bootstrapChecks() = %v, want %v", got, want)
	}
}

// loaded is the input the reconciler's second stage loads for Peering p, from Secret s
// (nil: none) and the consumer's tenant records, at now.
func loaded(t *testing.T, p *authv1beta1.Peering, s *corev1.Secret, now time.Time, records ...*cluster.TenantRecord) *input {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(scheme.New())
	if s != nil {
		b = b.WithObjects(s)
	}
	r := &Reconciler{APIReader: b.Build(), LiqoNamespace: testLiqoNS, ClusterID: testSelf}
	in := &input{peering: p, now: now, clusterID: testSelf}
	if err := r.loadBootstrap(context.Background(), in, records); err != nil {
		t.Fatal(err)
	}
	return in
}

// tampered is kubeconfig with its current user and cluster changed by tamper.
func tampered(t *testing.T, kubeconfig []byte, tamper func(*clientcmdapi.AuthInfo, *clientcmdapi.Cluster)) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	tamper(cfg.AuthInfos[ctx.AuthInfo], cfg.Clusters[ctx.Cluster])
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// consumedBy is a tenant record of provider saying that this cluster used cred there.
func consumedBy(provider string, cred *credential) *cluster.TenantRecord {
	rec := &cluster.TenantRecord{RemoteID: provider}
	rec.Consume(cluster.ConsumedBootstrap{User: cred.user, Serial: cred.serial, NotAfter: cred.notAfter}, testNow.Add(-time.Hour))
	return rec
}

func TestBootstrapChecks(t *testing.T) {
	provCA, otherCA := newCA(), newCA()
	good := provCA.peeringUser(testSelf)
	pin := must(authn.CAFingerprint(provCA.pem))
	otherPin := must(authn.CAFingerprint(otherCA.pem))
	admin := provCA.forge("kubernetes-admin", []string{"system:masters"}, 0xad, testNow.Add(24*time.Hour))
	forOther := provCA.peeringUser("cl-someone-else")
	expired := provCA.forge(good.user, nil, 0xe1, testNow.Add(-time.Minute))
	expiredAdmin := provCA.forge("kubernetes-admin", []string{"system:masters"}, 0xe2, testNow.Add(-time.Minute))
	expiredForOther := provCA.forge(forOther.user, nil, 0xe3, testNow.Add(-time.Minute))
	pinned := func(fp string) func(*authv1beta1.Peering) {
		return func(p *authv1beta1.Peering) { p.Spec.ProviderCAFingerprint = fp }
	}
	withExec := tampered(t, good.kubeconfig, func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
		u.Exec = &clientcmdapi.ExecConfig{Command: "aws", Args: []string{"eks", "get-token"}, APIVersion: "client.authentication.k8s.io/v1beta1"}
	})
	withToken := tampered(t, good.kubeconfig, func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) { u.Token = "admin-token" })
	insecure := tampered(t, good.kubeconfig, func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) { c.InsecureSkipTLSVerify = true })
	notACert := tampered(t, good.kubeconfig, func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
		u.ClientCertificateData = []byte("not a certificate")
	})

	for _, tc := range []struct {
		name string
		in   func(t *testing.T) *input
		// check is the check that fails first ("" none), with the state, reason, requeue
		// and a part of the message of its verdict.
		check   string
		state   authv1beta1.PeeringState
		reason  string
		requeue time.Duration
		msg     string
		// later are checks after check that fail the input too: the first failure wins
		// over them.
		later []string
	}{
		{name: "a peering user for this cluster passes", in: func(t *testing.T) *input { return loaded(t, peering(nil), bootstrapSecret(good.kubeconfig), testNow) }},
		{name: "the CA pinned is the kubeconfig's", in: func(t *testing.T) *input {
			return loaded(t, peering(pinned(pin)), bootstrapSecret(good.kubeconfig), testNow)
		}},
		{name: "used with another credential: this one is new", in: func(t *testing.T) *input {
			return loaded(t, peering(nil), bootstrapSecret(good.kubeconfig), testNow, consumedBy(testProvider, admin))
		}},

		{name: "no Secret", in: func(t *testing.T) *input { return loaded(t, peering(nil), nil, testNow) },
			check: "checkSecretPresent", state: authv1beta1.PeeringPending, reason: authv1beta1.ReasonBootstrapSecretMissing, requeue: secretRetry, msg: "Secret liqo/" + testSecret + " not found"},
		{name: "no data key kubeconfig", in: func(t *testing.T) *input {
			s := bootstrapSecret(nil)
			s.Data = map[string][]byte{"config": good.kubeconfig}
			return loaded(t, peering(nil), s, testNow)
		}, check: "checkKubeconfig", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialInvalid, msg: `no data key "kubeconfig"`},
		{name: "not YAML", in: func(t *testing.T) *input {
			return loaded(t, peering(nil), bootstrapSecret([]byte("{{ not: yaml")), testNow)
		},
			check: "checkKubeconfig", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialInvalid, msg: "cannot be parsed"},
		{name: "an embedded certificate that is none", in: func(t *testing.T) *input { return loaded(t, peering(nil), bootstrapSecret(notACert), testNow) },
			check: "checkKubeconfig", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialInvalid, msg: "its client certificate"},
		{name: "an exec plugin", in: func(t *testing.T) *input { return loaded(t, peering(nil), bootstrapSecret(withExec), testNow) },
			check: "checkKubeconfig", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused, msg: "an exec credential plugin"},
		{name: "a token", in: func(t *testing.T) *input { return loaded(t, peering(nil), bootstrapSecret(withToken), testNow) },
			check: "checkKubeconfig", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused, msg: "a token"},
		{name: "TLS verification skipped", in: func(t *testing.T) *input { return loaded(t, peering(nil), bootstrapSecret(insecure), testNow) },
			check: "checkKubeconfig", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused, msg: "insecure-skip-tls-verify"},
		{name: "an administrator's certificate", in: func(t *testing.T) *input { return loaded(t, peering(nil), bootstrapSecret(admin.kubeconfig), testNow) },
			check: "checkPeeringUser", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused, msg: `authenticates as "kubernetes-admin"`},
		{name: "a peering user for another consumer", in: func(t *testing.T) *input {
			return loaded(t, peering(nil), bootstrapSecret(forOther.kubeconfig), testNow)
		}, check: "checkIssuedForThisCluster", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused, msg: `issued for cluster "cl-someone-else"`},
		{name: "expired", in: func(t *testing.T) *input {
			return loaded(t, peering(nil), bootstrapSecret(expired.kubeconfig), testNow)
		},
			check: "checkNotExpired", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapExpired, msg: "expired at"},
		{name: "expiring now", in: func(t *testing.T) *input {
			return loaded(t, peering(nil), bootstrapSecret(good.kubeconfig), good.notAfter)
		},
			check: "checkNotExpired", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapExpired, msg: "expired at"},
		{name: "another CA pinned", in: func(t *testing.T) *input {
			return loaded(t, peering(pinned(otherPin)), bootstrapSecret(good.kubeconfig), testNow)
		}, check: "checkCAPin", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonProviderCAMismatch, msg: "trusts CA " + pin},
		{name: "used already", in: func(t *testing.T) *input {
			return loaded(t, peering(nil), bootstrapSecret(good.kubeconfig), testNow, consumedBy("cl-elsewhere", good))
		}, check: "checkNotConsumed", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapConsumed, msg: `to peer with "cl-elsewhere" already`},

		// The first failure wins.
		{name: "an administrator's expired certificate used already, another CA pinned", in: func(t *testing.T) *input {
			return loaded(t, peering(pinned(otherPin)), bootstrapSecret(expiredAdmin.kubeconfig), testNow, consumedBy(testProvider, expiredAdmin))
		}, check: "checkPeeringUser", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused, msg: "not as a peering user",
			later: []string{"checkIssuedForThisCluster", "checkNotExpired", "checkCAPin", "checkNotConsumed"}},
		{name: "an expired peering user for another consumer", in: func(t *testing.T) *input {
			return loaded(t, peering(pinned(otherPin)), bootstrapSecret(expiredForOther.kubeconfig), testNow)
		}, check: "checkIssuedForThisCluster", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused, msg: "was issued for cluster",
			later: []string{"checkNotExpired", "checkCAPin"}},
		{name: "expired, used already and another CA pinned", in: func(t *testing.T) *input {
			return loaded(t, peering(pinned(otherPin)), bootstrapSecret(expired.kubeconfig), testNow, consumedBy(testProvider, expired))
		}, check: "checkNotExpired", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapExpired, msg: "expired at",
			later: []string{"checkCAPin", "checkNotConsumed"}},
		{name: "used already with another CA pinned", in: func(t *testing.T) *input {
			return loaded(t, peering(pinned(otherPin)), bootstrapSecret(good.kubeconfig), testNow, consumedBy(testProvider, good))
		}, check: "checkCAPin", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonProviderCAMismatch, msg: "spec.providerCAFingerprint pins " + otherPin,
			later: []string{"checkNotConsumed"}},
		{name: "an exec plugin with an administrator's certificate", in: func(t *testing.T) *input {
			kc := tampered(t, admin.kubeconfig, func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
				u.Exec = &clientcmdapi.ExecConfig{Command: "sh"}
			})
			return loaded(t, peering(nil), bootstrapSecret(kc), testNow)
		}, check: "checkKubeconfig", state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused, msg: "exec credential plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in(t)
			var want *verdict
			for _, c := range bootstrapChecks() {
				name := checkName(c)
				if want != nil {
					// Past the first failure, only the checks that may read the input run.
					if slices.Contains(tc.later, name) && c(in) == nil {
						t.Errorf("%s passes: the case proves nothing of the order", name)
					}
					continue
				}
				switch v := c(in); {
				case name != tc.check && v != nil:
					t.Fatalf("%s fails first: %+v; want %q to", name, v, tc.check)
				case name == tc.check && v == nil:
					t.Fatalf("%s passes", name)
				case name == tc.check:
					want = v
				}
			}
			got := firstFailure(in, bootstrapChecks())
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("firstFailure = %+v, want the verdict of %q: %+v", got, tc.check, want)
			}
			if want == nil {
				return
			}
			if got.state != tc.state || got.reason != tc.reason || got.requeue != tc.requeue {
				t.Errorf("verdict = %s/%s requeue %v, want %s/%s requeue %v", got.state, got.reason, got.requeue, tc.state, tc.reason, tc.requeue)
			}
			if !strings.Contains(got.message, tc.msg) {
				t.Errorf("message %q does not say %q", got.message, tc.msg)
			}
			if strings.Contains(got.message, "PRIVATE KEY") || strings.Contains(got.message, "admin-token") {
				t.Errorf("message %q quotes the credential", got.message)
			}
		})
	}
}

func TestPeeredVerdict(t *testing.T) {
	notReady := func(id *authv1beta1.Identity) {
		id.Status.Conditions[0].Status, id.Status.Conditions[0].Reason, id.Status.Conditions[0].Message = metav1.ConditionFalse, "CertificateExpired", "the provider drained it"
	}
	for _, tc := range []struct {
		name    string
		mutate  func(*authv1beta1.Identity)
		state   authv1beta1.PeeringState
		reason  string
		requeue time.Duration
		msg     string
	}{
		{name: "ready, valid for a day", state: authv1beta1.PeeringPeered, reason: authv1beta1.ReasonPeered, requeue: identityRecheck, msg: "valid until 2026-11-24T12:00:00Z"},
		{name: "ready, expiring in a minute", mutate: func(id *authv1beta1.Identity) { id.Status.Certificate.NotAfter.Time = testNow.Add(time.Minute) },
			state: authv1beta1.PeeringPeered, reason: authv1beta1.ReasonPeered, requeue: time.Minute, msg: "certificate c0ffee"},
		{name: "no Ready condition yet", mutate: func(id *authv1beta1.Identity) { id.Status.Conditions = nil },
			state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonPeeringIdentityNotReady, requeue: providerRetry, msg: "no Ready condition yet"},
		{name: "not ready", mutate: notReady,
			state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonPeeringIdentityNotReady, requeue: providerRetry, msg: "is not ready: CertificateExpired: the provider drained it"},
		{name: "ready, expired now", mutate: func(id *authv1beta1.Identity) { id.Status.Certificate.NotAfter.Time = testNow },
			state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonPeeringIdentityNotReady, requeue: providerRetry, msg: "expired and was not renewed"},
		{name: "ready, no certificate", mutate: func(id *authv1beta1.Identity) { id.Status.Certificate = nil },
			state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonPeeringIdentityNotReady, requeue: providerRetry, msg: "expired and was not renewed"},
		{name: "ready, no expiry", mutate: func(id *authv1beta1.Identity) { id.Status.Certificate.NotAfter = nil },
			state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonPeeringIdentityNotReady, requeue: providerRetry, msg: "expired and was not renewed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := readyIdentity(testNow.Add(24 * time.Hour))
			if tc.mutate != nil {
				tc.mutate(id)
			}
			v := peeredVerdict(&input{peering: peering(nil), now: testNow, clusterID: testSelf, identity: id})
			if v.state != tc.state || v.reason != tc.reason || v.requeue != tc.requeue {
				t.Errorf("verdict = %s/%s requeue %v, want %s/%s requeue %v", v.state, v.reason, v.requeue, tc.state, tc.reason, tc.requeue)
			}
			if !strings.Contains(v.message, tc.msg) {
				t.Errorf("message %q does not say %q", v.message, tc.msg)
			}
		})
	}
}
