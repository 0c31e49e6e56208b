package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPeeringUserConsumer: the consumer a peering user names, whose own ID may hold dashes,
// is what PeeringUserName was given.
func TestPeeringUserConsumer(t *testing.T) {
	for user, want := range map[string]string{
		PeeringUserName("cl-consumer", "0a1b2c3d"): "cl-consumer",
		PeeringUserName("a", "b"):                  "a",
		"liqo-peer-user-cl-consumer-x7k2q":         "cl-consumer",
		"liqo-peer-user-a-b-c-d":                   "a-b-c",
		"liqo-peer-user-nodash":                    "nodash",
		"liqo-peer-user-x":                         "x",
		"kubernetes-admin":                         "kubernetes",
	} {
		if got := PeeringUserConsumer(user); got != want {
			t.Errorf("PeeringUserConsumer(%q) = %q, want %q", user, got, want)
		}
	}
}

// TestProjectLabelNamesEveryLabel: every constant of this package named *Label is a
// ProjectLabel, so that a label added here is not dropped by the manager's cache, which
// keeps of others' objects only ProjectLabels.
func TestProjectLabelNamesEveryLabel(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasSuffix(name.Name, "Label") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				seen++
				if v, _ := strconv.Unquote(lit.Value); !ProjectLabel(v) {
					t.Errorf("%s (%s) is not a ProjectLabel", name.Name, v)
				}
			}
			return true
		})
	}
	if seen < 10 {
		t.Fatalf("found %d label constants: the parse missed them", seen)
	}
	if ProjectLabel("liqo.io/anything") {
		t.Error("a label of no constant is a ProjectLabel")
	}
}
