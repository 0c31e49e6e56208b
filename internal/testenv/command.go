package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// RunCommand runs name with args and returns its stdout and stderr; a failure carries the
// command line and its stderr.
func RunCommand(ctx context.Context, name string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String(), nil
}

// WriteManagerKubeconfig writes ManagerKubeconfig, the kubeconfig of cp's
// liqo-auth-manager ServiceAccount: a manager started with it runs as it does in a
// cluster, with only the permissions liqoctl install grants it.
func (cp *ControlPlane) WriteManagerKubeconfig(ctx context.Context) error {
	cfg, err := cp.ServiceAccountConfig(ctx, wire.DefaultLiqoNamespace, wire.ManagerName)
	if err != nil {
		return err
	}
	return WriteKubeconfig(cp.ManagerKubeconfig(), cp.Name, cfg)
}

// ManagerKubeconfig is where WriteManagerKubeconfig writes, in cp's directory.
func (cp *ControlPlane) ManagerKubeconfig() string {
	return filepath.Join(cp.Dir, "liqo-auth-manager.kubeconfig")
}
