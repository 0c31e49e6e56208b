package wiring

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// TestControllerRegistersOnlyDeclaredWatches: a watch of a kind access.ManagerWatched does
// not declare for the controller's side fails the setup, naming it; declared ones register.
func TestControllerRegistersOnlyDeclaredWatches(t *testing.T) {
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	nop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })

	err = NewController(mgr, "undeclared", access.Consumer).For(&authv1beta1.Identity{}).Reads(&rbacv1.Role{}).Complete(nop)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "controller undeclared watches *v1.Role")
	err = NewController(mgr, "not-for-this-side", access.Consumer).For(&authv1beta1.Tenant{}).Complete(nop)
	assert.ErrorContains(t, err, "*v1beta1.Tenant")
	require.NoError(t, NewController(mgr, "declared", access.Provider).For(&authv1beta1.Tenant{}).Reads(&corev1.Secret{}).
		WatchTenantNamespaces(Fixed("x")).Complete(nop))
}
