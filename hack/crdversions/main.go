// Command crdversions adds the served, non-storage v1alpha1 version to the CRDs that
// controller-gen writes for v1beta1, with the same schema (conversion None), so that YAML
// from Liqo's published manual-flow documents (apiVersion authentication.liqo.io/v1alpha1)
// applies unchanged.
//
//	crdversions IN_DIR OUT_DIR
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdversions:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: crdversions IN_DIR OUT_DIR")
	}
	files, err := filepath.Glob(filepath.Join(args[0], "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRD YAML in %s", args[0])
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		out, err := addAlpha(in)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(args[1], filepath.Base(f)), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// liqoKind says whether Liqo's documents apply kind as v1alpha1.
func liqoKind(kind string) bool {
	switch kind {
	case "Tenant", "Identity", "ResourceSlice", "Renew":
		return true
	}
	return false
}

func addAlpha(in []byte) ([]byte, error) {
	var crd map[string]any
	if err := yaml.Unmarshal(in, &crd); err != nil {
		return nil, err
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	if len(versions) != 1 {
		return nil, fmt.Errorf("want exactly one version from controller-gen, got %d", len(versions))
	}
	beta, _ := versions[0].(map[string]any)
	if beta["name"] != "v1beta1" {
		return nil, fmt.Errorf("want version v1beta1, got %v", beta["name"])
	}
	raw, err := yaml.Marshal(beta)
	if err != nil {
		return nil, err
	}
	var alpha map[string]any
	if unmarshalErr := yaml.Unmarshal(raw, &alpha); unmarshalErr != nil {
		return nil, unmarshalErr
	}
	names, _ := spec["names"].(map[string]any)
	if !liqoKind(fmt.Sprint(names["kind"])) {
		// A kind of this project's own (Peering): Liqo never served it, nothing to be
		// compatible with.
		return in, nil
	}
	alpha["name"] = "v1alpha1"
	alpha["storage"] = false
	alpha["deprecated"] = true
	alpha["deprecationWarning"] = fmt.Sprintf("authentication.liqo.io/v1alpha1 %s is served for Liqo compatibility; use authentication.liqo.io/v1beta1", names["kind"])
	spec["versions"] = []any{alpha, beta}
	spec["conversion"] = map[string]any{"strategy": "None"}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	return []byte("---\n" + strings.TrimPrefix(string(out), "---\n")), nil
}
