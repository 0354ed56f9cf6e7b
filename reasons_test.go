package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The reasons the docs name are the code's: docs/reference.md's table of reasons has a
// row for each reason of api/v1alpha1/keys.go and says where each is given as the code
// gives it, and every other page's list of reasons is one of those columns.

// reasonCode is the parsed code that gives reasons: replicator and desired,
// tests left out.
type reasonCode struct {
	t       *testing.T
	fset    *token.FileSet
	files   map[string]*ast.File // by base name
	reasons map[string]string    // the Reason constants of keys.go: name, value
	seen    map[token.Pos]bool
}

func parseReasonCode(t *testing.T) *reasonCode {
	t.Helper()
	c := &reasonCode{
		t: t, fset: token.NewFileSet(), files: map[string]*ast.File{}, reasons: map[string]string{}, seen: map[token.Pos]bool{},
	}
	for name, value := range keysConstants(t) {
		if strings.HasPrefix(name, "Reason") {
			c.reasons[name] = value
		}
	}
	for _, dir := range []string{"replicator", "desired"} {
		paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(c.fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			c.files[filepath.Base(path)] = file
		}
	}
	return c
}

// each calls f with every node of every file and the function declaration it is in
// (nil outside one).
func (c *reasonCode) each(f func(file string, n ast.Node, fn *ast.FuncDecl)) {
	for name, file := range c.files {
		for _, decl := range file.Decls {
			fn, _ := decl.(*ast.FuncDecl)
			ast.Inspect(decl, func(n ast.Node) bool {
				if n != nil {
					f(name, n, fn)
				}
				return true
			})
		}
	}
}

// of returns the reasons expression e, in function fn of file, can have: a Reason
// constant is itself; a call, what the function called returns; a variable, what is
// assigned to it; a parameter, what its callers pass (a method's callers in its own
// file); a field, what the composite literals of the file's struct types with that field
// give it. Anything else fails the test, which then has to learn it.
func (c *reasonCode) of(e ast.Expr, file string, fn *ast.FuncDecl) map[string]bool {
	c.t.Helper()
	got := map[string]bool{}
	if c.seen[e.Pos()] {
		return got
	}
	c.seen[e.Pos()] = true
	defer delete(c.seen, e.Pos())
	where := c.fset.Position(e.Pos()).String()
	switch e := e.(type) {
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok && pkg.Name == "v1alpha1" {
			value, ok := c.reasons[e.Sel.Name]
			if !ok {
				c.t.Fatalf("%s: v1alpha1.%s is no Reason constant of keys.go", where, e.Sel.Name)
			}
			got[value] = true
			return got
		}
		return c.ofField(e.Sel.Name, file, where)
	case *ast.CallExpr:
		name := calledName(e)
		found := false
		c.each(func(f string, n ast.Node, _ *ast.FuncDecl) {
			d, ok := n.(*ast.FuncDecl)
			if !ok || d.Name.Name != name || d.Recv != nil || d.Body == nil {
				return
			}
			found = true
			ast.Inspect(d.Body, func(n ast.Node) bool {
				if r, ok := n.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
					merge(got, c.of(r.Results[0], f, d))
				}
				return true
			})
		})
		if !found {
			c.t.Fatalf("%s: cannot tell the reasons %s returns", where, name)
		}
		return got
	case *ast.Ident:
		if fn == nil {
			c.t.Fatalf("%s: %s outside a function", where, e.Name)
		}
		if i := paramIndex(fn, e.Name); i >= 0 {
			calls := 0
			c.each(func(f string, n ast.Node, caller *ast.FuncDecl) {
				call, ok := n.(*ast.CallExpr)
				if !ok || calledName(call) != fn.Name.Name || fn.Recv != nil && f != file || i >= len(call.Args) {
					return
				}
				calls++
				merge(got, c.of(call.Args[i], f, caller))
			})
			if calls == 0 {
				c.t.Fatalf("%s: no call of %s gives its %s", where, fn.Name.Name, e.Name)
			}
			return got
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if a, ok := n.(*ast.AssignStmt); ok && len(a.Lhs) == len(a.Rhs) {
				for i, lhs := range a.Lhs {
					if id, ok := lhs.(*ast.Ident); ok && id.Name == e.Name {
						merge(got, c.of(a.Rhs[i], file, fn))
					}
				}
			}
			return true
		})
		if len(got) == 0 {
			c.t.Fatalf("%s: cannot tell the reasons %s holds", where, e.Name)
		}
		return got
	}
	c.t.Fatalf("%s: cannot tell the reasons of a %T", where, e)
	return nil
}

// ofField returns the reasons the composite literals of file's struct types with the
// field give it.
func (c *reasonCode) ofField(field, file, where string) map[string]bool {
	c.t.Helper()
	got := map[string]bool{}
	for _, d := range c.files[file].Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range g.Specs {
			ts, ok := s.(*ast.TypeSpec)
			if !ok {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			index := -1
			for i, f := range st.Fields.List {
				if len(f.Names) == 1 && f.Names[0].Name == field {
					index = i
				}
			}
			if index < 0 {
				continue
			}
			c.each(func(f string, n ast.Node, fn *ast.FuncDecl) {
				if lit, ok := n.(*ast.CompositeLit); ok && typeName(lit.Type) == ts.Name.Name {
					if value := fieldValue(lit, field, index); value != nil {
						merge(got, c.of(value, f, fn))
					}
				}
			})
		}
	}
	if len(got) == 0 {
		c.t.Fatalf("%s: cannot tell the reasons of the field %s", where, field)
	}
	return got
}

// literals returns the reasons the composite literals of type typ (as written, e.g.
// "metav1.Condition") give their field.
func (c *reasonCode) literals(typ, field string) map[string]bool {
	got := map[string]bool{}
	c.each(func(f string, n ast.Node, fn *ast.FuncDecl) {
		if lit, ok := n.(*ast.CompositeLit); ok && typeName(lit.Type) == typ {
			if value := fieldValue(lit, field, -1); value != nil {
				merge(got, c.of(value, f, fn))
			}
		}
	})
	return got
}

// conditionReasons returns the reasons of metav1.Condition literals, and those assigned
// to the Reason of a variable made from one.
func (c *reasonCode) conditionReasons() map[string]bool {
	got := c.literals("metav1.Condition", "Reason")
	c.each(func(f string, n ast.Node, fn *ast.FuncDecl) {
		a, ok := n.(*ast.AssignStmt)
		if !ok || len(a.Lhs) != len(a.Rhs) || fn == nil {
			return
		}
		for i, lhs := range a.Lhs {
			sel, ok := lhs.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Reason" {
				continue
			}
			if v, ok := sel.X.(*ast.Ident); ok && madeFrom(fn, v.Name, "metav1.Condition") {
				merge(got, c.of(a.Rhs[i], f, fn))
			}
		}
	})
	return got
}

// eventReasons returns the reasons of the Events recorded (Eventf) in file; it fails
// the test when an Event is recorded in a file the test does not read.
func (c *reasonCode) eventReasons(file string, others ...string) map[string]bool {
	got := map[string]bool{}
	c.each(func(f string, n ast.Node, fn *ast.FuncDecl) {
		call, ok := n.(*ast.CallExpr)
		if !ok || calledName(call) != "Eventf" {
			return
		}
		if f != file && !slices.Contains(others, f) {
			c.t.Fatalf("%s: an Event the docs test does not read", c.fset.Position(call.Pos()))
		}
		if f == file && len(call.Args) > 3 {
			merge(got, c.of(call.Args[3], f, fn)) // Eventf(regarding, related, type, reason, action, note, …)
		}
	})
	return got
}

func calledName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	case *ast.IndexExpr: // a generic function instantiated
		if id, ok := f.X.(*ast.Ident); ok {
			return id.Name
		}
	}
	return ""
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok {
			return pkg.Name + "." + e.Sel.Name
		}
	}
	return ""
}

// fieldValue is the value lit gives field: keyed, or at index when positional.
func fieldValue(lit *ast.CompositeLit, field string, index int) ast.Expr {
	for i, elt := range lit.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			if key, ok := kv.Key.(*ast.Ident); ok && key.Name == field {
				return kv.Value
			}
		} else if i == index {
			return elt
		}
	}
	return nil
}

func paramIndex(fn *ast.FuncDecl, name string) int {
	i := 0
	for _, field := range fn.Type.Params.List {
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
	}
	return -1
}

// madeFrom reports whether fn defines the variable name from a composite literal of typ.
func madeFrom(fn *ast.FuncDecl, name, typ string) bool {
	made := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if a, ok := n.(*ast.AssignStmt); ok && a.Tok == token.DEFINE && len(a.Lhs) == len(a.Rhs) {
			for i, lhs := range a.Lhs {
				lit, isLit := a.Rhs[i].(*ast.CompositeLit)
				if id, ok := lhs.(*ast.Ident); ok && id.Name == name && isLit && typeName(lit.Type) == typ {
					made = true
				}
			}
		}
		return true
	})
	return made
}

func merge(into, from map[string]bool) {
	for k := range from {
		into[k] = true
	}
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// codeReasonColumns are where the code gives each reason, by the heading of the column
// of docs/reference.md's table that says it.
func codeReasonColumns(t *testing.T) (all map[string]bool, columns map[string]map[string]bool) {
	t.Helper()
	c := parseReasonCode(t)
	all = map[string]bool{}
	for _, value := range c.reasons {
		all[value] = true
	}
	var notSynced map[string]bool
	c.each(func(f string, n ast.Node, fn *ast.FuncDecl) {
		if s, ok := n.(*ast.ValueSpec); ok && len(s.Names) == 1 && s.Names[0].Name == "notSyncedReasons" {
			notSynced = map[string]bool{}
			for _, elt := range s.Values[0].(*ast.CompositeLit).Elts {
				merge(notSynced, c.of(elt, f, fn))
			}
		}
	})
	columns = map[string]map[string]bool{
		"source Event":                      c.eventReasons("source_controller.go", "sync_controller.go"),
		"ConfigMapSync or SecretSync Event": c.eventReasons("sync_controller.go", "source_controller.go"),
		"`Ready`":                           c.conditionReasons(),
		"`failedNamespaces`":                c.literals("v1alpha1.FailedNamespace", "Reason"),
		"`cmsync_sources_not_synced`":       notSynced,
	}
	for heading, reasons := range columns {
		if len(reasons) == 0 {
			t.Fatalf("read no reason of the column %s from the code", heading)
		}
	}
	return all, columns
}

// TestReferenceReasonsAreTheCodes reads docs/reference.md's table of reasons: a row for
// every Reason constant of keys.go, and in each column "yes" exactly where the code
// gives that reason.
func TestReferenceReasonsAreTheCodes(t *testing.T) {
	all, columns := codeReasonColumns(t)
	_, section, ok := strings.Cut(reference(t), "\n## Reasons\n")
	if !ok {
		t.Fatal("docs/reference.md has no section ## Reasons")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var headings []string
	rows := map[string]bool{}
	documented := map[string]map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if headings == nil {
			headings = cells
			continue
		}
		reason := strings.Trim(cells[0], "`")
		rows[reason] = true
		for i, cell := range cells[1:] {
			if cell == "yes" {
				if documented[headings[i+1]] == nil {
					documented[headings[i+1]] = map[string]bool{}
				}
				documented[headings[i+1]][reason] = true
			}
		}
	}
	if got, want := sortedKeys(rows), sortedKeys(all); !slices.Equal(got, want) {
		t.Errorf("docs/reference.md#reasons has rows %v; keys.go has the reasons %v", got, want)
	}
	for heading, reasons := range columns {
		if got, want := sortedKeys(documented[heading]), sortedKeys(reasons); !slices.Equal(got, want) {
			t.Errorf("docs/reference.md#reasons, column %s: %v; the code gives %v", heading, got, want)
		}
	}
}

var (
	// reasonList is a list of reasons in prose: "reason `A`", "reasons: `A` (why), `B`
	// or `C`".
	reasonList = regexp.MustCompile("\\breasons?:? (`[A-Z][A-Za-z]+`( \\([^()]*\\))?((,? (or|and) |, )`[A-Z][A-Za-z]+`( \\([^()]*\\))?)*)")
	// reasonEvent is "a `Reason` Event".
	reasonEvent   = regexp.MustCompile("`([A-Z][A-Za-z]+)` [Ee]vents?\\b")
	quotedName    = regexp.MustCompile("`([A-Z][A-Za-z]+)`")
	parenthetical = regexp.MustCompile(`\([^()]*\)`)
	// reasonSubject is what a list of reasons is about: the last of these before it in
	// its sentence.
	reasonSubject = regexp.MustCompile("`Ready`|Events?\\b|`failedNamespaces`")
	blockStart    = regexp.MustCompile(`^(\s*[-*] |\s*\d+\. |#|\|)`)
)

// othersReasons are reasons of other programs' Events the docs name.
var othersReasons = map[string]bool{
	"Pulled": true, // the kubelet's, in development.md
}

// TestDocsReasonsAreTheCodes reads every list of reasons in the prose of the docs: each
// names reasons of keys.go only, and a list about a Ready condition, about the Events of
// a source or of a ConfigMapSync or SecretSync, or about failedNamespaces names exactly
// the reasons the code gives there (the columns of docs/reference.md#reasons).
func TestDocsReasonsAreTheCodes(t *testing.T) {
	all, columns := codeReasonColumns(t)
	lists := 0
	for _, page := range docPages(t) {
		_, prose := fencedBlocks(t, page)
		for _, block := range proseBlocks(prose) {
			for _, m := range reasonEvent.FindAllStringSubmatch(block, -1) {
				if !all[m[1]] && !othersReasons[m[1]] {
					t.Errorf("%s: %q: cmsync has no reason %s", page, m[0], m[1])
				}
			}
			for _, at := range reasonList.FindAllStringSubmatchIndex(block, -1) {
				lists++
				list := block[at[2]:at[3]]
				named := map[string]bool{}
				for _, m := range quotedName.FindAllStringSubmatch(parenthetical.ReplaceAllString(list, ""), -1) {
					named[m[1]] = true
					if !all[m[1]] {
						t.Errorf("%s: %q: cmsync has no reason %s", page, list, m[1])
					}
				}
				start := strings.LastIndex(block[:at[0]], ". ") + 1 // 0 without one
				sentence := block[start:at[0]]
				subjects := reasonSubject.FindAllString(sentence, -1)
				if len(subjects) == 0 {
					continue // one reason named in passing, not a list of where it is given
				}
				var column string
				switch subject := subjects[len(subjects)-1]; {
				case subject == "`Ready`":
					column = "`Ready`"
				case subject == "`failedNamespaces`":
					column = "`failedNamespaces`"
				case strings.Contains(sentence, "ConfigMapSync") || strings.Contains(sentence, "SecretSync"):
					column = "ConfigMapSync or SecretSync Event"
				default:
					column = "source Event"
				}
				if got, want := sortedKeys(named), sortedKeys(columns[column]); !slices.Equal(got, want) {
					t.Errorf("%s: %q names %v for the %s; the code gives %v", page, strings.TrimSpace(block[start:at[1]]), got, column, want)
				}
			}
		}
	}
	if lists < 5 {
		t.Errorf("found only %d lists of reasons in the docs", lists)
	}
}

// proseBlocks joins the lines of prose into paragraphs, list items, headings and table
// rows, each on one line with single spaces.
func proseBlocks(lines []string) []string {
	var blocks []string
	start := 0
	flush := func(end int) {
		if text := strings.Join(strings.Fields(strings.Join(lines[start:end], " ")), " "); text != "" {
			blocks = append(blocks, text)
		}
		start = end
	}
	for i, line := range lines {
		if strings.TrimSpace(line) == "" || blockStart.MatchString(line) {
			flush(i)
		}
	}
	flush(len(lines))
	return blocks
}
