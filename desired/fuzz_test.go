package desired

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Every parser of user input: no panic, and every input either parses or is refused
// with an error that names the annotation or field and the problem.

func FuzzParseTargetAnnotations(f *testing.F) {
	for _, seed := range [][2]string{
		{"team-*,shared,!team-legacy", "env=prod,tier in (web,api),!deprecated"},
		{"*", ""}, {"", "=prod"}, {"team-[a", "tier in ("}, {"!a,!b", "a b"}, {"a,,b", "env="},
		{"Team_A", "x notin (a)"}, {"[^0-9]*", "!x"}, {" , ", "a=b,c!=d"},
	} {
		f.Add(seed[0], seed[1], true, true)
	}
	f.Fuzz(func(t *testing.T, names, selector string, hasNames, hasSelector bool) {
		var n, s *string
		if hasNames {
			n = &names
		}
		if hasSelector {
			s = &selector
		}
		spec, err := parseTargetAnnotations(n, s)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, "target-namespaces") && !strings.Contains(msg, "target-selector") {
				t.Fatalf("error does not name the annotation: %q", msg)
			}
			return
		}
		// A valid spec can be evaluated against any namespace without panicking.
		spec.Matches(Namespace{Name: "team-a", Labels: map[string]string{"env": "prod"}})
		if hasNames && strings.TrimSpace(names) == "" {
			t.Fatalf("an empty target-namespaces was accepted")
		}
	})
}

func FuzzParseStripMetadata(f *testing.F) {
	for _, seed := range []string{"example.com/*", "*", "", "[", "app.kubernetes.io/managed-by", "a,b, c/*,", "x/[a-z]?"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		globs, err := parseStripMetadata(value)
		if err != nil {
			if !strings.Contains(err.Error(), "strip-metadata") {
				t.Fatalf("error does not name the annotation: %q", err)
			}
			return
		}
		if len(globs) == 0 {
			t.Fatalf("an empty list was accepted")
		}
		isStripped("example.com/key", globs)
	})
}

func FuzzParseSyncTargets(f *testing.F) {
	f.Add("team-a", "team-*,!team-legacy", "env", "In", "prod")
	f.Add("", "team-[a", "", "", "")
	f.Add("Bad", "", "env", "Near", "x")
	f.Add("", "!only", "", "", "")
	f.Fuzz(func(t *testing.T, destination, destinations, key, operator, value string) {
		spec := v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: "platform",
			ConfigMapName:   "ca",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespace: destination},
		}
		if destinations != "" {
			spec.DestinationNamespaces = strings.Split(destinations, ",")
		}
		if key != "" || operator != "" {
			spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: key, Operator: metav1.LabelSelectorOperator(operator), Values: []string{value}}}}
		}
		targets, err := ParseSyncTargets(spec.SyncSpec())
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "spec.") && !strings.Contains(msg, "no targets") {
				t.Fatalf("error does not name the field: %q", msg)
			}
			return
		}
		TargetNamespaces(targets, Unbound("platform"), []Namespace{{Name: "team-a"}, {Name: destination}}, Policy{})
	})
}

func FuzzTemplate(f *testing.F) {
	f.Add("key", "value", "example.com/*", []byte{0, 1}, "k*,!key")
	f.Add("ca.crt", "v", "", []byte{}, "!ca.crt")
	f.Fuzz(func(t *testing.T, key, value, strip string, binary []byte, keyList string) {
		if !utf8.ValidString(key) || !utf8.ValidString(value) {
			return
		}
		src := sampleSource()
		src.Data[key] = value
		src.BinaryData[key] = binary
		src.Labels[key] = value
		globs, err := parseStripMetadata(strip)
		if err != nil {
			globs = nil
		}
		keys, err := parseKeyList(keyList)
		if err != nil {
			keys = KeyFilter{}
		}
		template := NewTemplate(ConfigMapKind{}, src, Shape{Strip: globs, Keys: keys, Name: "renamed"}, settingsOwner)
		replica := template.In("team-a")
		for k := range replica.Data {
			if !keys.Keeps(k) {
				t.Fatalf("key %q copied although the filter %q leaves it out", k, keys)
			}
		}
		if !settingsOwner.Owns(replica) {
			t.Fatalf("the desired replica is not owned by its source")
		}
		if d := template.Diff(replica); !d.InSync() {
			t.Fatalf("a replica differs from its own cached form: %+v", d)
		}
	})
}

func FuzzParseKeys(f *testing.F) {
	for _, seed := range []string{"ca.crt", "tls.*,!tls.key", "!a", "", " , ", "[", "a/b", "log-[a-z]?", "a,,b", "!", "[^0-9]*"} {
		f.Add(seed, "tls.key")
	}
	f.Fuzz(func(t *testing.T, value, key string) {
		keys, err := parseKeyList(value)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "entry ") && !strings.Contains(err.Error(), "the list is empty") {
				t.Fatalf("error does not name the entry: %q", err)
			}
			return
		}
		if !keys.IsSet() {
			t.Fatalf("a list with no entry was accepted: %q", value)
		}
		// A valid filter can be asked about any key, and keeps no key it excludes.
		kept := keys.Keeps(key)
		for _, pattern := range append(keys.exclude.globs, keys.exclude.names.UnsortedList()...) {
			if kept && globMatch(pattern, key) {
				t.Fatalf("%q kept although %q excludes it", key, pattern)
			}
		}
	})
}

func FuzzParseTargetName(f *testing.F) {
	for _, seed := range []string{"platform-ca", "", "A", "a..b", "a.b-c", strings.Repeat("a", 254), "-a", "a_b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "src", Annotations: map[string]string{v1alpha1.TargetNameAnnotation: value}}}
		shape, err := ShapeOf(src)
		if err != nil {
			if !strings.Contains(err.Error(), "invalid target-name") {
				t.Fatalf("error does not name the annotation: %q", err)
			}
			return
		}
		// An accepted name is one the API server accepts too.
		if len(shape.Name) == 0 || len(shape.Name) > 253 || strings.ToLower(shape.Name) != shape.Name || strings.ContainsAny(shape.Name, "/_ ") {
			t.Fatalf("accepted %q", shape.Name)
		}
	})
}
