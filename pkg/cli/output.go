package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// OutputFlags is -o/--output for commands that print objects.
type OutputFlags struct {
	Format string
}

// AddFlags registers -o with a default format (empty when the command prints a bare value).
func (o *OutputFlags) AddFlags(cmd *cobra.Command, def string) {
	cmd.Flags().StringVarP(&o.Format, "output", "o", def, "output format: yaml or json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// Validate checks the format.
func (o *OutputFlags) Validate() error {
	switch o.Format {
	case "", "yaml", "json":
		return nil
	}
	return fmt.Errorf("--output must be yaml or json, not %q", o.Format)
}

// PrintObjects writes objects as YAML (separated by ---) or JSON (one object, or a List).
func PrintObjects(w io.Writer, format string, objs ...client.Object) error {
	s := scheme.New()
	us := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		u, err := cluster.ToUnstructured(o, s)
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
		us = append(us, u)
	}
	switch format {
	case "json":
		var v any = us[0].Object
		if len(us) > 1 {
			items := make([]any, len(us))
			for i, u := range us {
				items[i] = u.Object
			}
			v = map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "    ")
		return enc.Encode(v)
	default:
		parts := make([]string, len(us))
		for i, u := range us {
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				return err
			}
			parts[i] = string(b)
		}
		_, err := io.WriteString(w, strings.Join(parts, "---\n"))
		return err
	}
}
