package integration

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// serialMark starts the comment that makes a test of this package run alone (doc.go).
const serialMark = "// Serial: "

// TestEveryTestSaysHowItRuns reads this package's test files: every test begins with
// t.Parallel(), or with a comment "// Serial: <why>" before its first statement. A test
// added without either fails here, so that none runs alone, one after another, by
// omission (doc.go); so does a serial test that calls t.Parallel after all, and a parallel
// one that changes the environment or the working directory of the whole process in its
// own body (the helpers it calls are not read).
func TestEveryTestSaysHowItRuns(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var tests, serial int
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !isTopLevelTest(fn) {
				continue
			}
			tests++
			switch howItRuns(f, fn) {
			case "parallel":
				if call := processWideCall(fn); call != "" {
					t.Errorf("%s: %s runs beside other tests but calls %s, which changes the whole process: mark it %q, or use t.Setenv or t.Chdir", fset.Position(fn.Pos()), fn.Name.Name, call, serialMark+"<why>")
				}
			case "serial":
				serial++
				if callsParallel(fn) {
					t.Errorf("%s: %s says it runs alone, yet calls t.Parallel", fset.Position(fn.Pos()), fn.Name.Name)
				}
			default:
				t.Errorf("%s: %s begins with neither t.Parallel() nor a comment %q saying why it runs alone", fset.Position(fn.Pos()), fn.Name.Name, serialMark+"<why>")
			}
		}
	}
	require.Positive(t, tests, "no test found: is the working directory this package?")
	t.Logf("%d tests, %d of them alone", tests, serial)
}

// isTopLevelTest reports whether fn is a test go test runs: TestXxx(t *testing.T).
func isTopLevelTest(fn *ast.FuncDecl) bool {
	if !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" || len(fn.Type.Params.List) != 1 {
		return false
	}
	star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}

// howItRuns is "parallel" when fn's first statement is t.Parallel() on its own parameter,
// "serial" when a comment with serialMark comes before its first statement, "" otherwise.
func howItRuns(f *ast.File, fn *ast.FuncDecl) string {
	first := fn.Body.Rbrace
	if len(fn.Body.List) > 0 {
		first = fn.Body.List[0].Pos()
		if e, ok := fn.Body.List[0].(*ast.ExprStmt); ok && isParallelCall(e.X, fn) {
			return "parallel"
		}
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if c.Pos() > fn.Body.Lbrace && c.Pos() < first && strings.HasPrefix(c.Text, serialMark) && len(strings.TrimSpace(strings.TrimPrefix(c.Text, serialMark))) > 0 {
				return "serial"
			}
		}
	}
	return ""
}

// isParallelCall reports whether n is a call of t.Parallel() on fn's own parameter t.
func isParallelCall(n ast.Node, fn *ast.FuncDecl) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok || len(call.Args) != 0 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Parallel" && isIdent(sel.X, fn.Type.Params.List[0].Names)
}

// isIdent reports whether e is one of names.
func isIdent(e ast.Expr, names []*ast.Ident) bool {
	id, ok := e.(*ast.Ident)
	if !ok {
		return false
	}
	for _, n := range names {
		if n.Name == id.Name {
			return true
		}
	}
	return false
}

// processWideCalls are the calls that change what every test of the process sees.
var processWideCalls = map[string]bool{"os.Setenv": true, "os.Unsetenv": true, "os.Clearenv": true, "os.Chdir": true}

// processWideCall is the first call of processWideCalls in fn's body, or "" if none: an
// assignment to os.Stdout or os.Stderr counts as one.
func processWideCall(fn *ast.FuncDecl) string {
	found := ""
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if found != "" {
			return false
		}
		switch n := n.(type) {
		case *ast.CallExpr:
			if name := qualified(n.Fun); processWideCalls[name] {
				found = name
			}
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if name := qualified(l); name == "os.Stdout" || name == "os.Stderr" {
					found = "an assignment to " + name
				}
			}
		}
		return true
	})
	return found
}

// callsParallel reports whether fn's body calls t.Parallel on its own parameter anywhere
// (a subtest's t.Parallel, on the subtest's parameter, does not count).
func callsParallel(fn *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false // a subtest, whose t is its own
		}
		found = found || isParallelCall(n, fn)
		return !found
	})
	return found
}

// qualified is "pkg.Name" for a selector on an identifier, "" otherwise.
func qualified(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return id.Name + "." + sel.Sel.Name
}
