package v1alpha1

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestListLimitIsTheCRDs checks that the generated CRDs bound the explicit form's lists
// (destinationNamespaces, keys) at MaxListEntries, the bound the annotation form's lists
// have: the markers write the number, which must not drift from the constant.
func TestListLimitIsTheCRDs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under deploy/crds: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, version := range crd.Spec.Versions {
			lists := boundedLists(*version.Schema.OpenAPIV3Schema, "")
			if len(lists) == 0 {
				t.Errorf("%s %s: no destinationNamespaces or keys list found", file, version.Name)
			}
			for path, maxItems := range lists {
				if maxItems == nil || *maxItems != MaxListEntries {
					t.Errorf("%s %s: %s has maxItems %v, want %d (MaxListEntries)", file, version.Name, path, deref(maxItems), MaxListEntries)
				}
			}
		}
	}
}

// TestListLimitIsTheAdmissionPolicys checks that the chart's admission policy warns
// about a list annotation over MaxListEntries, the bound cmsync enforces.
func TestListLimitIsTheAdmissionPolicys(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "chart", "cmsync", "templates", "admission.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(".size() > %d)", MaxListEntries)
	if !strings.Contains(string(raw), want) || !strings.Contains(string(raw), fmt.Sprintf("has more than %d entries", MaxListEntries)) {
		t.Errorf("the admission policy does not bound list annotations at %d (MaxListEntries): no %q", MaxListEntries, want)
	}
}

// boundedLists finds the list properties named destinationNamespaces or keys under
// schema, by path, with their maxItems.
func boundedLists(schema apiextensionsv1.JSONSchemaProps, at string) map[string]*int64 {
	found := map[string]*int64{}
	for name, property := range schema.Properties {
		path := at + "." + name
		if property.Type == "array" && (name == "destinationNamespaces" || name == "keys") {
			found[path] = property.MaxItems
		}
		for p, maxItems := range boundedLists(property, path) {
			found[p] = maxItems
		}
	}
	return found
}

func deref(n *int64) any {
	if n == nil {
		return "none"
	}
	return *n
}
