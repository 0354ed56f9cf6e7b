package desired

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

func TestShapeOf(t *testing.T) {
	long := strings.Repeat("a", 254)
	tests := []struct {
		name        string
		annotations map[string]string
		wantName    string
		keep, drop  []string
		wantErr     string // a fragment of the error; "" for none
	}{
		{name: "nothing set copies everything under the source's name", keep: []string{"a", "tls.key"}},
		{name: "target-name", annotations: map[string]string{v1alpha1.TargetNameAnnotation: "platform-ca"}, wantName: "platform-ca"},
		{name: "target-name with dots", annotations: map[string]string{v1alpha1.TargetNameAnnotation: "ca.platform.example"}, wantName: "ca.platform.example"},
		{name: "empty target-name", annotations: map[string]string{v1alpha1.TargetNameAnnotation: ""}, wantErr: `invalid target-name "": the name is empty`},
		{
			name:        "upper-case target-name",
			annotations: map[string]string{v1alpha1.TargetNameAnnotation: "Platform-CA"},
			wantErr:     `invalid target-name "Platform-CA": not a valid name`,
		},
		{name: "underscore", annotations: map[string]string{v1alpha1.TargetNameAnnotation: "platform_ca"}, wantErr: "invalid target-name"},
		{name: "slash", annotations: map[string]string{v1alpha1.TargetNameAnnotation: "a/b"}, wantErr: "invalid target-name"},
		{name: "too long", annotations: map[string]string{v1alpha1.TargetNameAnnotation: long}, wantErr: "must be no more than 253"},
		{name: "trailing dash", annotations: map[string]string{v1alpha1.TargetNameAnnotation: "ca-"}, wantErr: "invalid target-name"},
		{name: "one key", annotations: map[string]string{v1alpha1.KeysAnnotation: "ca.crt"}, keep: []string{"ca.crt"}, drop: []string{"tls.crt", "tls.key"}},
		{
			name:        "globs and spaces",
			annotations: map[string]string{v1alpha1.KeysAnnotation: " log-*, feature.[ab] "},
			keep:        []string{"log-level", "feature.a"}, drop: []string{"feature.c", "db-url"},
		},
		{
			name:        "only exclusions keep the rest",
			annotations: map[string]string{v1alpha1.KeysAnnotation: "!tls.key"},
			keep:        []string{"ca.crt", "tls.crt"}, drop: []string{"tls.key"},
		},
		{
			name:        "exclusion wins over inclusion",
			annotations: map[string]string{v1alpha1.KeysAnnotation: "tls.*,!tls.key"},
			keep:        []string{"tls.crt"}, drop: []string{"tls.key", "ca.crt"},
		},
		{name: "empty keys", annotations: map[string]string{v1alpha1.KeysAnnotation: " "}, wantErr: `invalid keys " ": the list is empty`},
		{name: "empty entry", annotations: map[string]string{v1alpha1.KeysAnnotation: "a,,b"}, wantErr: `invalid keys "a,,b": entry "": empty key`},
		{name: "bare exclusion", annotations: map[string]string{v1alpha1.KeysAnnotation: "a,!"}, wantErr: `entry "!": empty key`},
		{
			name:        "malformed glob",
			annotations: map[string]string{v1alpha1.KeysAnnotation: "tls.[a"},
			wantErr:     `invalid keys "tls.[a": entry "tls.[a": malformed glob`,
		},
		{name: "character no key has", annotations: map[string]string{v1alpha1.KeysAnnotation: "a/b"}, wantErr: `character '/' cannot appear`},
		{name: "too long key", annotations: map[string]string{v1alpha1.KeysAnnotation: long}, wantErr: "longer than 253"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca-bundle", Annotations: tt.annotations}}
			shape, err := ShapeOf(src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if !reflect.DeepEqual(shape, Shape{}) {
					t.Errorf("an invalid shape was returned: %+v", shape)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if shape.Name != tt.wantName {
				t.Errorf("name %q, want %q", shape.Name, tt.wantName)
			}
			wantReplicaName := tt.wantName
			if wantReplicaName == "" {
				wantReplicaName = "ca-bundle"
			}
			if got := shape.NameFor(src.Name); got != wantReplicaName {
				t.Errorf("replica name %q, want %q", got, wantReplicaName)
			}
			expectKeys(t, shape.Keys, tt.keep, tt.drop)
		})
	}
	t.Run("every problem is named", func(t *testing.T) {
		_, err := ShapeOf(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			v1alpha1.TargetNameAnnotation: "A", v1alpha1.KeysAnnotation: "[", v1alpha1.StripMetadataAnnotation: "[",
		}}})
		for _, name := range []string{"strip-metadata", "target-name", "keys"} {
			if err == nil || !strings.Contains(err.Error(), "invalid "+name) {
				t.Errorf("error %v does not name %s", err, name)
			}
		}
	})
}

// expectKeys checks that the filter keeps every key of keep and none of drop.
func expectKeys(t *testing.T, keys KeyFilter, keep, drop []string) {
	t.Helper()
	for _, k := range keep {
		if !keys.Keeps(k) {
			t.Errorf("key %q left out", k)
		}
	}
	for _, k := range drop {
		if keys.Keeps(k) {
			t.Errorf("key %q kept", k)
		}
	}
}

func TestParseSyncShape(t *testing.T) {
	tests := []struct {
		name     string
		spec     v1alpha1.ConfigMapSyncSpec
		wantName string
		keep     []string
		drop     []string
		wantErr  string
	}{
		{name: "defaults", spec: v1alpha1.ConfigMapSyncSpec{ConfigMapName: "ca"}, keep: []string{"x"}},
		{
			name:     "renamed and filtered",
			spec:     v1alpha1.ConfigMapSyncSpec{ConfigMapName: "ca", ReplicaSpec: v1alpha1.ReplicaSpec{TargetName: "platform-ca", Keys: []string{"ca.crt"}}},
			wantName: "platform-ca",
			keep:     []string{"ca.crt"},
			drop:     []string{"tls.key"},
		},
		{
			name:    "bad name",
			spec:    v1alpha1.ConfigMapSyncSpec{ReplicaSpec: v1alpha1.ReplicaSpec{TargetName: "Bad"}},
			wantErr: `spec.targetName "Bad": not a valid name`,
		},
		{
			name:    "malformed glob",
			spec:    v1alpha1.ConfigMapSyncSpec{ReplicaSpec: v1alpha1.ReplicaSpec{Keys: []string{"ok", "[a-"}}},
			wantErr: `spec.keys[1]: malformed glob`,
		},
		{name: "empty entry", spec: v1alpha1.ConfigMapSyncSpec{ReplicaSpec: v1alpha1.ReplicaSpec{Keys: []string{""}}}, wantErr: `spec.keys[0]: empty key`},
		{
			name:    "empty list",
			spec:    v1alpha1.ConfigMapSyncSpec{ReplicaSpec: v1alpha1.ReplicaSpec{Keys: []string{}}},
			wantErr: `spec.keys is empty; remove it to copy every key`,
		},
		{
			name:    "character no key holds",
			spec:    v1alpha1.ConfigMapSyncSpec{ReplicaSpec: v1alpha1.ReplicaSpec{Keys: []string{"a/b"}}},
			wantErr: `spec.keys[0]: character '/' cannot appear in a key or key glob`,
		},
		{
			name:    "bad object name",
			spec:    v1alpha1.ConfigMapSyncSpec{ReplicaSpec: v1alpha1.ReplicaSpec{TargetName: "Bad_Name"}},
			wantErr: `spec.targetName "Bad_Name": not a valid name: a lowercase RFC 1123 subdomain`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shape, err := ParseSyncShape(tt.spec.SyncSpec())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if shape.Name != tt.wantName {
				t.Errorf("name %q, want %q", shape.Name, tt.wantName)
			}
			if got, want := SyncReplicaName(tt.spec.SyncSpec()), shape.NameFor(tt.spec.ConfigMapName); got != want {
				t.Errorf("SyncReplicaName %q, shape says %q", got, want)
			}
			expectKeys(t, shape.Keys, tt.keep, tt.drop)
		})
	}
}

// A shaped template: renamed, only the kept keys of data and binaryData, and a replica
// that gained a key is told to lose it.
func TestShapedTemplate(t *testing.T) {
	src := sampleSource()
	src.Data = map[string]string{"log-level": "debug", "db-url": "postgres://", "feature.a": "on"}
	src.BinaryData = map[string][]byte{"logo.png": {1}, "blob": {2}}
	keys, err := parseKeyList("log-*,feature.*,*.png")
	if err != nil {
		t.Fatal(err)
	}
	template := NewTemplate(ConfigMapKind{}, src, Shape{Name: "app-settings", Keys: keys}, settingsOwner)
	replica := template.In("team-a")
	if replica.Name != "app-settings" || template.Name() != "app-settings" {
		t.Errorf("replica named %q (template %q), want app-settings", replica.Name, template.Name())
	}
	if want := map[string]string{"log-level": "debug", "feature.a": "on"}; !reflect.DeepEqual(replica.Data, want) {
		t.Errorf("data %v, want %v", replica.Data, want)
	}
	if want := map[string][]byte{"logo.png": {1}}; !reflect.DeepEqual(replica.BinaryData, want) {
		t.Errorf("binaryData %v, want %v", replica.BinaryData, want)
	}
	if !settingsOwner.Owns(replica) || replica.Annotations[v1alpha1.SourceAnnotation] != "platform/settings" {
		t.Errorf("a renamed replica must still name its source: %v", replica.Annotations)
	}
	if template.Notice() != "" {
		t.Errorf("unexpected notice %q", template.Notice())
	}
	if d := template.Diff(replica); !d.InSync() {
		t.Errorf("the shaped replica differs from its own cached form: %+v", d)
	}
	// Someone adds a filtered-out key, and a new one, to the replica.
	tampered := template.In("team-a")
	tampered.Data["db-url"] = "postgres://"
	tampered.BinaryData["blob"] = []byte{2}
	d := template.Diff(tampered)
	if !d.Content || !reflect.DeepEqual(d.StaleText, []string{"db-url"}) || !reflect.DeepEqual(d.StaleBinary, []string{"blob"}) {
		t.Errorf("diff %+v, want the added keys stale", d)
	}
	if src.Data["db-url"] != "postgres://" || len(src.BinaryData) != 2 {
		t.Errorf("the source was modified")
	}
}

func TestKeysMatchingNothing(t *testing.T) {
	src := sampleSource()
	keys, _ := parseKeyList("nothing-*")
	template := NewTemplate(ConfigMapKind{}, src, Shape{Keys: keys}, settingsOwner)
	replica := template.In("team-a")
	if replica.Data != nil || replica.BinaryData != nil {
		t.Errorf("replica has data: %v %v", replica.Data, replica.BinaryData)
	}
	if want := `keys "nothing-*" match no key of the source: the replicas have no data`; template.Notice() != want {
		t.Errorf("notice %q, want %q", template.Notice(), want)
	}
	s := Summarize([]Result{{Namespace: "team-a", Outcome: Created}}, 0, nil, template.Notice())
	if s.State != v1alpha1.StatusSynced || !strings.HasSuffix(s.Message, "; "+template.Notice()) || !strings.HasPrefix(s.Message, "in sync in 1 namespace") {
		t.Errorf("status %s %q", s.State, s.Message)
	}
}

// A Secret filtered below what its type needs becomes Opaque, and says so; filtered
// within what its type needs, it keeps its type.
func TestSecretFilteredBelowItsType(t *testing.T) {
	tests := []struct {
		name     string
		typ      corev1.SecretType
		data     map[string][]byte
		keys     string
		wantType corev1.SecretType
		noticed  bool
	}{
		{name: "tls to its CA", typ: corev1.SecretTypeTLS, data: tlsData(), keys: "ca.crt", wantType: corev1.SecretTypeOpaque, noticed: true},
		{name: "tls without its CA", typ: corev1.SecretTypeTLS, data: tlsData(), keys: "!ca.crt", wantType: corev1.SecretTypeTLS},
		{name: "tls unfiltered", typ: corev1.SecretTypeTLS, data: tlsData(), keys: "*", wantType: corev1.SecretTypeTLS},
		{
			name: "dockerconfigjson without its key", typ: corev1.SecretTypeDockerConfigJson,
			data: map[string][]byte{".dockerconfigjson": []byte("{}"), "extra": {1}}, keys: "extra", wantType: corev1.SecretTypeOpaque, noticed: true,
		},
		{
			name:     "basic-auth keeps the username",
			typ:      corev1.SecretTypeBasicAuth,
			data:     map[string][]byte{"username": {1}, "password": {2}},
			keys:     "username",
			wantType: corev1.SecretTypeBasicAuth,
		},
		{
			name:     "basic-auth with neither",
			typ:      corev1.SecretTypeBasicAuth,
			data:     map[string][]byte{"username": {1}, "note": {2}},
			keys:     "note",
			wantType: corev1.SecretTypeOpaque,
			noticed:  true,
		},
		{
			name:     "ssh-auth",
			typ:      corev1.SecretTypeSSHAuth,
			data:     map[string][]byte{"ssh-privatekey": {1}, "known_hosts": {2}},
			keys:     "known_hosts",
			wantType: corev1.SecretTypeOpaque,
			noticed:  true,
		},
		{name: "opaque", typ: corev1.SecretTypeOpaque, data: tlsData(), keys: "ca.crt", wantType: corev1.SecretTypeOpaque},
		{name: "a type of the user's own", typ: "example.com/cert", data: tlsData(), keys: "ca.crt", wantType: "example.com/cert"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := sampleSecret()
			src.Type, src.Data = tt.typ, tt.data
			keys, err := parseKeyList(tt.keys)
			if err != nil {
				t.Fatal(err)
			}
			template := NewTemplate(SecretKind{}, src, Shape{Keys: keys}, tlsOwner)
			replica := template.In("team-a")
			if replica.Type != tt.wantType {
				t.Errorf("type %q, want %q", replica.Type, tt.wantType)
			}
			if noticed := strings.Contains(template.Notice(), "of type Opaque"); noticed != tt.noticed {
				t.Errorf("notice %q", template.Notice())
			}
			for k := range replica.Data {
				if !keys.Keeps(k) {
					t.Errorf("key %q copied", k)
				}
			}
			if strings.Contains(template.Notice(), string(tt.data["ca.crt"])) && len(tt.data["ca.crt"]) > 0 {
				t.Errorf("the notice holds a value")
			}
		})
	}
}

func tlsData() map[string][]byte {
	return map[string][]byte{"ca.crt": []byte("CA"), "tls.crt": []byte("CERT"), "tls.key": []byte("KEY")}
}

func TestWriteBudget(t *testing.T) {
	src := sampleSource()
	template := NewTemplate(ConfigMapKind{}, src, Shape{}, settingsOwner)
	size := template.Size()
	if want := writtenBytes(template.In("team-a")); size != want {
		t.Fatalf("size %d, want %d: the name, data and every label and annotation of the replica", size, want)
	}
	for _, tt := range []struct {
		budget  int64
		targets int
		ok      bool
	}{{0, 1 << 20, true}, {100 * size, 100, true}, {100*size - 1, 100, false}, {size, 1, true}, {size - 1, 1, false}} {
		err := Policy{MaxReplicatedBytes: tt.budget}.CheckWriteBudget(size, tt.targets)
		if (err == nil) != tt.ok {
			t.Errorf("budget %d, %d targets: %v", tt.budget, tt.targets, err)
		}
	}
}

// A source without data still writes its copied metadata into every target: a 250 KB
// annotation into 5,000 namespaces is over a 1 MiB budget, and stripping it brings the
// source back under.
func TestWriteBudgetCountsCopiedMetadata(t *testing.T) {
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "platform", Name: "settings",
		Annotations: map[string]string{"padding": strings.Repeat("x", 250_000)},
	}}
	policy := Policy{MaxReplicatedBytes: 1 << 20}
	size := NewTemplate(ConfigMapKind{}, src, Shape{}, settingsOwner).Size()
	if size < 250_000 {
		t.Fatalf("size %d: the copied annotation is not counted", size)
	}
	if err := policy.CheckWriteBudget(size, 5000); err == nil {
		t.Fatalf("a data-less source with a 250 KB annotation into 5,000 namespaces passed a 1 MiB budget")
	}
	stripped := NewTemplate(ConfigMapKind{}, src, Shape{Strip: []string{"padding"}}, settingsOwner).Size()
	if err := policy.CheckWriteBudget(stripped, 5000); err != nil {
		t.Fatalf("with the annotation stripped: %v", err)
	}
}

// FuzzWriteBudget: whatever metadata a source carries, the size the budget checks is
// what its replica holds.
func FuzzWriteBudget(f *testing.F) {
	f.Add("team", "platform", "note", "n", "k", "v", "")
	f.Add("", "", "padding", strings.Repeat("x", 1000), "", "", "padding")
	f.Fuzz(func(t *testing.T, labelKey, labelValue, annotationKey, annotationValue, dataKey, dataValue, strip string) {
		src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: "platform", Name: "settings",
			Labels:      map[string]string{labelKey: labelValue},
			Annotations: map[string]string{annotationKey: annotationValue},
		}, Data: map[string]string{dataKey: dataValue}}
		strips, err := parseStripMetadata(strip)
		if err != nil {
			strips = nil
		}
		template := NewTemplate(ConfigMapKind{}, src, Shape{Strip: strips}, settingsOwner)
		if got, want := template.Size(), writtenBytes(template.In("team-a")); got != want {
			t.Fatalf("size %d, the replica holds %d", got, want)
		}
	})
}

// writtenBytes is what cmsync writes into a replica, counted from the replica itself.
func writtenBytes(cm *corev1.ConfigMap) int64 {
	n := len(cm.Name)
	for k, v := range cm.Labels {
		n += len(k) + len(v)
	}
	for k, v := range cm.Annotations {
		n += len(k) + len(v)
	}
	for k, v := range cm.Data {
		n += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		n += len(k) + len(v)
	}
	return int64(n)
}

func TestBytesOf(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1023: "1023", 1024: "1Ki", 12858: "12.6Ki", 10 << 10: "10Ki", 1 << 30: "1Gi", 3<<20 + 1<<19: "3.5Mi"} {
		if got := bytesOf(n); got != want {
			t.Errorf("bytesOf(%d) = %q, want %q", n, got, want)
		}
	}
}
