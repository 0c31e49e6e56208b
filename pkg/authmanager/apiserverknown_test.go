package authmanager

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

func TestRestartWhenAPIServerKnown(t *testing.T) {
	cm := func(name, url string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: name}, Data: map[string]string{cluster.ConfigAPIServerURL: url}}
	}
	cases := []struct {
		name    string
		initial []client.Object
		later   *corev1.ConfigMap
		want    error
	}{
		{name: "already named at start", initial: []client.Object{cm(wire.ConfigMapName, "https://p:6443")}, want: ErrAPIServerKnown},
		{name: "named later", later: cm(wire.ConfigMapName, "https://p:6443"), want: ErrAPIServerKnown},
		{name: "configuration without a URL", later: cm(wire.ConfigMapName, ""), want: nil},
		{name: "another ConfigMap names one", later: cm("other", "https://p:6443"), want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.initial...).
				WithIndex(&corev1.ConfigMap{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).Build()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- RestartWhenAPIServerKnown{Client: c, Namespace: wire.DefaultLiqoNamespace}.Start(ctx) }()
			if tc.later != nil {
				time.Sleep(100 * time.Millisecond)
				require.NoError(t, c.Create(context.Background(), tc.later))
			}
			select {
			case err := <-done:
				assert.ErrorIs(t, err, tc.want)
				if tc.want == nil {
					assert.NoError(t, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Start did not return")
			}
		})
	}
}
