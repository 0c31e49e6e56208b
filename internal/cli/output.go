package cli

import (
	"bytes"
	"encoding/json"
	"errors"
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
		u.Object = SanitizeValue(u.Object).(map[string]any)
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
	// Every string escaped as the table escapes it, the fields kept in their order.
	if raw, err = sanitizeJSON(raw); err != nil {
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

// sanitizeJSON re-encodes a JSON document token by token with every string, keys
// included, passed through Sanitize: the value SanitizeValue would give, in the
// document's own field order.
func sanitizeJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	type level struct {
		object bool
		n      int
	}
	var stack []level
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			out.WriteRune(rune(d))
			continue
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			switch {
			case top.object && top.n%2 == 1:
				out.WriteByte(':')
			case top.n > 0:
				out.WriteByte(',')
			}
			top.n++
		}
		switch t := tok.(type) {
		case json.Delim:
			stack = append(stack, level{object: t == '{'})
			out.WriteRune(rune(t))
		case string:
			b, _ := json.Marshal(Sanitize(t))
			out.Write(b)
		default:
			b, err := json.Marshal(t)
			if err != nil {
				return nil, err
			}
			out.Write(b)
		}
	}
}

// SanitizeValue is v (decoded JSON: maps, lists, strings, numbers) with every string,
// map keys included, passed through Sanitize. Every structured output (-o json, yaml,
// jsonpath, templates, name) goes through it: what another cluster wrote (a slice's
// resource names, a denial reason, a verify detail) never reaches the terminal raw. The
// price is that such a string shows its escapes in data too, as in the table; liqoctl
// refuses such strings at admission where a peer writes them (the CRD patterns), so only
// objects forged around those rules show the difference.
func SanitizeValue(v any) any {
	switch x := v.(type) {
	case string:
		return Sanitize(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[Sanitize(k)] = SanitizeValue(e)
		}
		return out
	case []any:
		for i := range x {
			x[i] = SanitizeValue(x[i])
		}
		return x
	}
	return v
}

// PrintReport writes report as data when -o asks for it, or else as the table render
// writes. A report's table quotes names, conditions and details the other cluster may have
// written, so it is printed sanitized, as data is.
func PrintReport[R any](out io.Writer, report R, output *OutputFlags, render func(io.Writer, R) error) error {
	if output.Format() != "" {
		return output.PrintData(out, report)
	}
	var b bytes.Buffer
	if err := render(&b, report); err != nil {
		return err
	}
	_, err := io.WriteString(out, Sanitize(b.String()))
	return err
}
