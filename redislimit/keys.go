package redislimit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unsafe"
)

// maxKeyPart is the longest encoded key part kept as it is; longer parts
// are replaced by a hash, so a Redis key's length is bounded whatever the
// input.
const maxKeyPart = 64

// keySafe reports whether c is kept as it is in an encoded key part. Every
// other byte is escaped as %XX. '{', '}' (hash tags), '%' (the escape),
// '/' and '=' (the separators of a key's parts) and '~' (the mark of a
// hashed part) are never safe, so encodings are injective and no input can
// end or open a hash tag.
func keySafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == ':' || c == '@' || c == '[' || c == ']'
}

// encodedLen is the length of s's encoding before hashing.
func encodedLen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if keySafe(s[i]) {
			n++
		} else {
			n += 3
		}
	}
	return n
}

// appendKeyPart appends the encoding of s, which may come from a client,
// to dst: safe bytes are kept, others become %XX, and an encoding longer
// than maxKeyPart is replaced by "~" and the hex SHA-256 of s. Distinct
// inputs give distinct parts (up to SHA-256 collisions), and no part
// contains '{', '}', '/' or '='.
func appendKeyPart(dst []byte, s string) []byte {
	if encodedLen(s) > maxKeyPart {
		var sum [sha256.Size]byte
		if len(s) <= scratchBuf {
			var b [scratchBuf]byte // no copy of s on the heap for the usual lengths
			sum = sha256.Sum256(b[:copy(b[:], s)])
		} else {
			sum = sha256.Sum256([]byte(s))
		}
		dst = append(dst, '~')
		return hex.AppendEncode(dst, sum[:])
	}
	const digits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keySafe(c) {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', digits[c>>4], digits[c&15])
	}
	return dst
}

// encodeKeyPart returns appendKeyPart's encoding of s.
func encodeKeyPart(s string) string { return string(appendKeyPart(nil, s)) }

// tagOf returns the part of key that names its hash tag, by Redis
// Cluster's rule: what lies between the first '{' and the first '}' after
// it, when that is not empty; else the whole key.
func tagOf(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// appendRedisKey appends the Redis key of one limit to dst:
//
//	rategate:<kind>:{<tag>}<id><suffix>
//
// kind names the algorithm ("tb", "fw", "sl", "cc", "pt"), so limiters of
// different algorithms given the same Options.Key never share state. The
// hash tag is the encoding of tagOf(key) for a plain limit (key is
// Options.Key) and of tagOf(sub) for a keyed one (sub is the key given to
// For), so every Redis key of one limit lands in one cluster slot, and
// limits whose keys name one tag ("{acme}day", "{acme}second") share it. id
// tells apart the limits of one tag: nothing for a plain limit whose key is
// its tag, "=" and the key's encoding for another plain limit, "/", the
// encoding of Options.Key, "/" and that of sub for a keyed limit. Encoded
// parts contain none of '{', '}', '/', '=', so no two limits share a key.
// suffix tells apart the keys of one limit.
func appendRedisKey(dst []byte, kind, key, sub string, keyed bool, suffix string) []byte {
	dst = append(dst, "rategate:"...)
	dst = append(dst, kind...)
	dst = append(dst, ":{"...)
	whole := key
	if keyed {
		whole = sub
	}
	tag := tagOf(whole)
	dst = appendKeyPart(dst, tag)
	dst = append(dst, '}')
	switch {
	case keyed:
		dst = append(dst, '/')
		dst = appendKeyPart(dst, key)
		dst = append(dst, '/')
		dst = appendKeyPart(dst, sub)
	case tag != key:
		dst = append(dst, '=')
		dst = appendKeyPart(dst, key)
	}
	return append(dst, suffix...)
}

// redisKey returns appendRedisKey's key.
func redisKey(kind, key, sub string, keyed bool, suffix string) string {
	return string(appendRedisKey(nil, kind, key, sub, keyed, suffix))
}

// keyBuf is the room for a limit's Redis keys inside its handle: enough for
// the usual keys (an address, a tenant's name), so that making the handle
// is one allocation; longer keys get a string of their own.
const keyBuf = 120

// scratchBuf is the room on the stack in which a limit's Redis keys are
// made, and a long key part copied to be hashed: longer ones cost heap
// allocations too.
const scratchBuf = 256

// setKeys writes the Redis keys of the limit named key and sub into h, in
// h.buf when they fit. A limit has one key, or two when alg has a suffix:
// the first is the second followed by the suffix (the log of a strict log,
// the holders of a semaphore), so both are one string.
func (h *handle) setKeys(kind, key, sub string, keyed bool, suffix string, two bool) {
	// Made on the stack, then copied into h or into a string of its
	// length: one allocation for a key too long for h, not one per
	// doubling of a growing slice.
	var scratch [scratchBuf]byte
	b := appendRedisKey(scratch[:0], kind, key, sub, keyed, suffix)
	var full string
	if len(b) <= len(h.buf) { // it fits: the string shares h's memory
		n := copy(h.buf[:], b)
		full = unsafe.String(&h.buf[0], n)
	} else {
		full = string(b)
	}
	h.karr[0] = full
	h.keys = h.karr[:1]
	if two {
		h.karr[1] = full[:len(full)-len(suffix)]
		h.keys = h.karr[:2]
	}
}
