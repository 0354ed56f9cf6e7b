package desired

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// contentHashLength is the length of a content hash: a label value holds at most 63.
const contentHashLength = 40

// contentHash is the value of the content-hash label of a replica holding c: a
// SHA-256 of every part of the content (an object's fields in JSON), each written with its length so that no two
// contents write the same bytes, cut to 40 hex characters like the source-id label
// (a label value holds at most 63). A Secret's hash sits only on its replica, where
// whoever may read the label may read the value itself.
func contentHash(c Content) string {
	h := sha256.New()
	field(h, c.Type)
	immutable := ""
	if c.Immutable != nil {
		immutable = strconv.FormatBool(*c.Immutable)
	}
	field(h, immutable)
	hashMap(h, "text", c.Text)
	hashMap(h, "binary", c.Binary)
	// Only an object's content has fields: a ConfigMap's or Secret's hash is as it was
	// before objects were copied, so their replicas' labels stay true.
	if c.Fields != nil {
		field(h, "fields")
		field(h, fieldsJSON(c.Fields))
	}
	return hex.EncodeToString(h.Sum(nil))[:contentHashLength]
}

func hashMap[V string | []byte](h hash.Hash, name string, m map[string]V) {
	field(h, name)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	writeLength(h, len(keys))
	for _, k := range keys {
		field(h, k)
		field(h, m[k])
	}
}

// field writes v with its length before it. A hash.Hash never fails a write.
func field[V string | []byte](h hash.Hash, v V) {
	writeLength(h, len(v))
	_, _ = h.Write([]byte(v))
}

func writeLength(h hash.Hash, n int) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	_, _ = h.Write(b[:])
}

// fingerprintOf hashes a replica's name, labels, annotations and owner reference
// (Template.Fingerprint).
func fingerprintOf(name string, labels, annotations map[string]string, owner *metav1.OwnerReference) string {
	h := sha256.New()
	field(h, name)
	if owner != nil {
		field(h, owner.Kind+"/"+owner.Name+"/"+string(owner.UID))
	}
	hashMap(h, "labels", labels)
	hashMap(h, "annotations", annotations)
	return hex.EncodeToString(h.Sum(nil))[:contentHashLength]
}
