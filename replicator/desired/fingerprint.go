package desired

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"
	"sync"
	"unsafe"
)

// A fingerprint stands for a value that is not held in memory: an HMAC-SHA256 under a
// key drawn when the process starts. Keyed, so that nobody can write into a replica a
// value that passes for the fingerprint of the source's value, and so that a memory
// dump of the replica cache tells nothing about short values. Fingerprints never leave
// the process.
const fingerprintPrefix = "hmac-sha256:"

// fingerprintKey is drawn once per process; it is never changed after start.
var fingerprintKey = newFingerprintKey()

func newFingerprintKey() []byte {
	key := make([]byte, sha256.Size)
	// crypto/rand.Read never returns an error (it crashes the program instead).
	_, _ = rand.Read(key)
	return key
}

// fingerprintOf returns the fingerprint of v. The replica cache fingerprints the long
// values of every replica event, so the MACs are pooled rather than built each time.
func fingerprintOf[V ~string | ~[]byte](v V) string {
	mac := macs.Get().(hash.Hash)
	defer macs.Put(mac)
	mac.Reset()
	_, _ = mac.Write(unsafeBytes(v))
	var sum [sha256.Size]byte
	out := make([]byte, len(fingerprintPrefix)+hex.EncodedLen(sha256.Size))
	copy(out, fingerprintPrefix)
	hex.Encode(out[len(fingerprintPrefix):], mac.Sum(sum[:0]))
	return string(out)
}

// unsafeBytes is v's bytes without a copy (the MAC only reads them): copying a
// ConfigMap's string value for each replica event was the transform's largest
// allocation.
func unsafeBytes[V ~string | ~[]byte](v V) []byte {
	if b, ok := any(v).([]byte); ok {
		return b
	}
	s := string(v)
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

var macs = sync.Pool{New: func() any { return hmac.New(sha256.New, fingerprintKey) }}

// isFingerprint reports whether v has the form of a fingerprint.
func isFingerprint[V ~string | ~[]byte](v V) bool {
	s := string(v)
	if len(s) != len(fingerprintPrefix)+2*sha256.Size || !strings.HasPrefix(s, fingerprintPrefix) {
		return false
	}
	_, err := hex.DecodeString(s[len(fingerprintPrefix):])
	return err == nil
}

// fingerprintValues returns a new map with every value longer than longerThan bytes
// replaced by its fingerprint (longerThan -1: every value). A value that already has
// the form of a fingerprint is kept, so fingerprinting twice changes nothing: informers
// may transform an object twice, and a value of that form in a replica can only equal
// the fingerprint of the source's value if someone knows the process's key.
func fingerprintValues[V ~string | ~[]byte](m map[string]V, longerThan int) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		if len(v) > longerThan && !isFingerprint(v) {
			out[k] = V(fingerprintOf(v))
		} else {
			out[k] = v
		}
	}
	return out
}
