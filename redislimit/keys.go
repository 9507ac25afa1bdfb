package redislimit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxKeyPart is the longest encoded key part kept as it is; longer parts
// are replaced by a hash, so a Redis key's length is bounded whatever the
// input.
const maxKeyPart = 64

// keySafe reports whether c is kept as it is in an encoded key part. Every
// other byte is escaped as %XX. '{', '}' (hash tags), '%' (the escape),
// '/' (the separator of a keyed limit's parts) and '~' (the mark of a
// hashed part) are never safe, so encodings are injective and no input
// can end or open a hash tag.
func keySafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == ':' || c == '@' || c == '[' || c == ']'
}

// encodeKeyPart encodes s, which may come from a client, for use inside a
// hash tag: safe bytes are kept, others become %XX, and a result longer
// than maxKeyPart is replaced by "~" and the hex SHA-256 of s. Distinct
// inputs give distinct parts (up to SHA-256 collisions), and no part
// contains '{', '}' or '/'.
func encodeKeyPart(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if keySafe(s[i]) {
			n++
		} else {
			n += 3
		}
	}
	if n > maxKeyPart {
		sum := sha256.Sum256([]byte(s))
		return "~" + hex.EncodeToString(sum[:])
	}
	if n == len(s) {
		return s
	}
	const digits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keySafe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(digits[c>>4])
		b.WriteByte(digits[c&15])
	}
	return b.String()
}

// hashTag returns the hash tag, braces included, of the limit named key
// (Options.Key) and, for a keyed limiter, sub (the key given to For;
// keyed is false for a plain limiter). A plain limit's tag never contains
// '/' and a keyed one's always does, so the two never meet; every Redis key
// of one limit starts with the same tag, so its scripts touch one cluster
// slot.
func hashTag(key, sub string, keyed bool) string {
	t := "{" + encodeKeyPart(key)
	if keyed {
		t += "/" + encodeKeyPart(sub)
	}
	return t + "}"
}

// redisKey returns the Redis key of one limit: "rategate:" + kind + ":" +
// the hash tag + suffix. kind names the algorithm ("tb", "fw", "sl",
// "cc", "pt"), so limiters of different algorithms given the same
// Options.Key never share state; suffix tells apart the keys of one limit.
func redisKey(kind, tag, suffix string) string {
	return "rategate:" + kind + ":" + tag + suffix
}
