package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// make test-unit runs the tests of every package outside test/ and hack/ (which have
// their own targets): a package moved or added is not left out of make test.
func TestMakeTestUnitRunsEveryPackage(t *testing.T) {
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^test-unit:.*\n\tgo test -count=1 ([^\n]+)`).FindSubmatch(makefile)
	if recipe == nil {
		t.Fatal("no go test line in the Makefile's test-unit recipe")
	}
	patterns := strings.Fields(string(recipe[1]))
	covered := func(dir string) bool {
		for _, p := range patterns {
			p = strings.TrimPrefix(p, "./")
			if tree, ok := strings.CutSuffix(p, "/..."); ok && (dir == tree || strings.HasPrefix(dir, tree+"/")) {
				return true
			}
			if p == dir {
				return true
			}
		}
		return false
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || path == "test" || path == "hack" || path == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") && !covered(filepath.Dir(path)) {
			t.Errorf("%s: its package is not among make test-unit's %v", path, patterns)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
