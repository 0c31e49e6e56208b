package access

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestThreatModelIsTheDocumentedTable: docs/security.md holds the threat model exactly as
// ThreatModelTable renders it from ManagerWatched and CommandReads.
func TestThreatModelIsTheDocumentedTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := ThreatModelTable(); !strings.Contains(string(doc), want) {
		t.Errorf("docs/security.md does not hold the threat model derived from access.ManagerWatched and access.CommandReads; put this table under \"Threat model\":\n\n%s", want)
	}
}

// TestThreatModelTestsExist: every row of the threat model names tests that exist in
// test/integration, and every untrusted row has one; a row without a test is a finding.
func TestThreatModelTestsExist(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "test", "integration", "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no integration tests found: %v", err)
	}
	defined := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
	}
	for _, r := range ThreatModel() {
		if !r.Trusted && len(r.Tests) == 0 {
			t.Errorf("%s writing %s: no test acts as it", r.Principal, r.Resource)
		}
		for _, name := range r.Tests {
			if !defined[name] {
				t.Errorf("%s writing %s: the test %s does not exist in test/integration", r.Principal, r.Resource, name)
			}
		}
	}
}

// TestEveryWatchedKindNamesItsWriters: a kind the manager watches says who may write it and
// who reads it, so that the threat model and TestPrincipalMatrix have its rows.
func TestEveryWatchedKindNamesItsWriters(t *testing.T) {
	for _, w := range ManagerWatched() {
		if len(w.Writers) == 0 || w.ReadBy == "" {
			t.Errorf("watched kind %s names no writer or no reader", w.Resource)
		}
	}
}
