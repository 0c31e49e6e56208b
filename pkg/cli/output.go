package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// OutputFlags is -o/--output, through cli-runtime's PrintFlags, so that it behaves as in
// kubectl: yaml, json, name, jsonpath=…, jsonpath-as-json=…, jsonpath-file=…,
// go-template=…, go-template-file=…, template=…, templatefile=…, with
// --show-managed-fields, --template and --allow-missing-template-keys.
type OutputFlags struct {
	flags *genericclioptions.PrintFlags
}

// AddFlags registers the flags, with a default format (empty when the command prints a
// bare value or progress by default).
func (o *OutputFlags) AddFlags(cmd *cobra.Command, def string) {
	o.flags = genericclioptions.NewPrintFlags("")
	if def != "" {
		o.flags = o.flags.WithDefaultOutput(def)
	}
	o.flags.AddFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(o.flags.AllowedFormats(), cobra.ShellCompDirectiveNoFileComp))
}

// AddDataFlags registers the flags of a command that prints a report or a value, not
// Kubernetes objects (info, version, verify): kubectl's formats except name, which names
// objects; it is neither advertised nor accepted.
func (o *OutputFlags) AddDataFlags(cmd *cobra.Command, def string) {
	o.flags = genericclioptions.NewPrintFlags("")
	o.flags.NamePrintFlags = nil
	if def != "" {
		o.flags = o.flags.WithDefaultOutput(def)
	}
	o.flags.AddFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(o.flags.AllowedFormats(), cobra.ShellCompDirectiveNoFileComp))
}

// Format is the chosen format, "" when none.
func (o *OutputFlags) Format() string {
	if o.flags == nil || o.flags.OutputFormat == nil {
		return ""
	}
	return *o.flags.OutputFormat
}

// Validate checks the format (and a template, if any).
func (o *OutputFlags) Validate() error {
	if o.Format() == "" {
		return nil
	}
	if _, err := o.flags.ToPrinter(); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	return nil
}

// PrintObjects prints objects with their apiVersion and kind: YAML documents separated by
// ---, and one JSON document (a List for several), as kubectl does.
func (o *OutputFlags) PrintObjects(w io.Writer, objs ...client.Object) error {
	p, err := o.flags.ToPrinter()
	if err != nil {
		return err
	}
	s := scheme.New()
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, obj := range objs {
		u, err := cluster.ToUnstructured(obj, s)
		if err != nil {
			return err
		}
		list.Items = append(list.Items, *u)
	}
	if len(list.Items) == 1 || o.Format() == "yaml" || o.Format() == "name" {
		for i := range list.Items {
			if err := p.PrintObj(&list.Items[i], w); err != nil {
				return err
			}
		}
		return nil
	}
	return p.PrintObj(list, w)
}

// PrintData prints a value that is not a Kubernetes object (a report, a version) in the
// chosen format: yaml, json or a template; -o name is for objects.
func (o *OutputFlags) PrintData(w io.Writer, v any) error {
	if o.Format() == "name" {
		return fmt.Errorf("--output name prints object names; this command prints no objects: use yaml, json or a template")
	}
	p, err := o.flags.ToPrinter()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if strings.HasPrefix(o.Format(), "jsonpath") || strings.Contains(o.Format(), "template") {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		return p.PrintObj(&unstructured.Unstructured{Object: m}, w)
	}
	return p.PrintObj(&runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}, w)
}
