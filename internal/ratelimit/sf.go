package ratelimit

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"
)

// A parser of Structured Field Values for HTTP (RFC 9651): Lists,
// Dictionaries and Items, with every bare item type (Integer, Decimal,
// String, Token, Byte Sequence, Boolean, Date, Display String), as the
// RFC's parsing algorithms (section 4.2) give them. It is checked against
// the public test suite (testdata/structured-field-tests) and fuzzed.

// sfKind is the type of a bare item.
type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBinary
	sfBoolean
	sfDate
	sfDisplayString
)

// sfBare is a bare item: i holds an Integer, a Date, a Boolean (0 or 1) or a
// Decimal in thousandths (RFC 9651 decimals have at most 3 fractional
// digits, so they are exact); s holds a String, Token, Display String
// (UTF-8) or Byte Sequence (its bytes).
type sfBare struct {
	kind sfKind
	i    int64
	s    string
}

// sfPair is a key and its value: a parameter, or a dictionary member.
type sfPair[V any] struct {
	key string
	val V
}

type sfParam = sfPair[sfBare]

// sfItem is a bare item with its parameters.
type sfItem struct {
	bare   sfBare
	params []sfParam
}

// sfMember is a member of a List or a Dictionary: an Item, or an Inner List
// (inner set) of items with the inner list's parameters.
type sfMember struct {
	inner  bool
	item   sfItem
	items  []sfItem
	params []sfParam
}

type sfDictMember = sfPair[sfMember]

var errSF = errors.New("ratelimit: malformed structured field")

// param returns the value of parameter key, if present.
func (it *sfItem) param(key string) (sfBare, bool) {
	for _, p := range it.params {
		if p.key == key {
			return p.val, true
		}
	}
	return sfBare{}, false
}

// sfParser walks one field value (its lines joined as RFC 9651 section 4.2
// says).
type sfParser struct {
	s string
	i int
}

// joinLines combines a field's lines into one value, as section 4.2 says
// for Lists and Dictionaries (and Items: a second line then fails).
func joinLines(lines []string) string {
	if len(lines) == 1 {
		return lines[0]
	}
	return strings.Join(lines, ", ")
}

// parseSFList parses a List field (section 4.2.1).
func parseSFList(lines []string) ([]sfMember, error) {
	p := sfParser{s: joinLines(lines)}
	p.skipSP()
	var out []sfMember
	for !p.eof() {
		m, err := p.itemOrInnerList()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
		if err := p.nextMember(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseSFDict parses a Dictionary field (section 4.2.2). A key seen again
// keeps its place and takes the later value.
func parseSFDict(lines []string) ([]sfDictMember, error) {
	p := sfParser{s: joinLines(lines)}
	p.skipSP()
	var out []sfDictMember
	for !p.eof() {
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		var m sfMember
		if p.peek() == '=' {
			p.i++
			if m, err = p.itemOrInnerList(); err != nil {
				return nil, err
			}
		} else {
			m.item.bare = sfBare{kind: sfBoolean, i: 1}
			if m.item.params, err = p.params(); err != nil {
				return nil, err
			}
		}
		out = setPair(out, key, m)
		if err := p.nextMember(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setPair sets key's value: in its place if it is there (a later value
// wins, RFC 9651 sections 4.2.2 and 4.2.3.2), else at the end.
func setPair[V any](ps []sfPair[V], key string, v V) []sfPair[V] {
	for i := range ps {
		if ps[i].key == key {
			ps[i].val = v
			return ps
		}
	}
	return append(ps, sfPair[V]{key, v})
}

// parseSFItem parses an Item field (section 4.2.3).
func parseSFItem(lines []string) (sfItem, error) {
	p := sfParser{s: joinLines(lines)}
	p.skipSP()
	it, err := p.item()
	if err != nil {
		return sfItem{}, err
	}
	p.skipSP()
	if !p.eof() {
		return sfItem{}, errSF
	}
	return it, nil
}

func (p *sfParser) eof() bool { return p.i >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) skipSP() {
	for !p.eof() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for !p.eof() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// nextMember moves past the comma between two members: nil at the end of
// the field, an error when something else follows or the field ends on a
// comma.
func (p *sfParser) nextMember() error {
	p.skipOWS()
	if p.eof() {
		return nil
	}
	if p.s[p.i] != ',' {
		return errSF
	}
	p.i++
	p.skipOWS()
	if p.eof() {
		return errSF // a trailing comma
	}
	return nil
}

func (p *sfParser) itemOrInnerList() (sfMember, error) {
	if p.peek() == '(' {
		return p.innerList()
	}
	it, err := p.item()
	return sfMember{item: it}, err
}

func (p *sfParser) innerList() (sfMember, error) {
	p.i++ // '('
	m := sfMember{inner: true}
	for !p.eof() {
		p.skipSP()
		if p.peek() == ')' {
			p.i++
			var err error
			m.params, err = p.params()
			return m, err
		}
		it, err := p.item()
		if err != nil {
			return m, err
		}
		m.items = append(m.items, it)
		if c := p.peek(); c != ' ' && c != ')' {
			return m, errSF
		}
	}
	return m, errSF
}

func (p *sfParser) item() (sfItem, error) {
	b, err := p.bareItem()
	if err != nil {
		return sfItem{}, err
	}
	params, err := p.params()
	return sfItem{bare: b, params: params}, err
}

func (p *sfParser) bareItem() (sfBare, error) {
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || isAlpha(c):
		return p.token(), nil
	case c == ':':
		return p.binary()
	case c == '?':
		return p.boolean()
	case c == '@':
		p.i++
		b, err := p.number()
		if err != nil || b.kind != sfInteger {
			return sfBare{}, errSF
		}
		b.kind = sfDate
		return b, nil
	case c == '%':
		return p.displayString()
	}
	return sfBare{}, errSF
}

func (p *sfParser) params() ([]sfParam, error) {
	var out []sfParam
	for p.peek() == ';' {
		p.i++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		val := sfBare{kind: sfBoolean, i: 1}
		if p.peek() == '=' {
			p.i++
			if val, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		out = setPair(out, key, val)
	}
	return out, nil
}

// key parses a key: lcalpha or '*', then lcalpha, DIGIT, '_', '-', '.', '*'.
func (p *sfParser) key() (string, error) {
	start := p.i
	if c := p.peek(); c != '*' && (c < 'a' || c > 'z') {
		return "", errSF
	}
	for p.i++; !p.eof() && isKeyChar(p.s[p.i]); p.i++ {
	}
	return p.s[start:p.i], nil
}

func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// number parses an Integer or Decimal (section 4.2.4).
func (p *sfParser) number() (sfBare, error) {
	neg := p.peek() == '-'
	if neg {
		p.i++
	}
	if !isDigit(p.peek()) {
		return sfBare{}, errSF
	}
	var v, frac int64
	digits, fracDigits, dot := 0, 0, false
scan:
	for ; !p.eof(); p.i++ {
		c := p.s[p.i]
		switch {
		case isDigit(c) && dot:
			frac = frac*10 + int64(c-'0')
			fracDigits++
		case isDigit(c):
			v = v*10 + int64(c-'0')
		case c == '.' && !dot:
			if digits > 12 {
				return sfBare{}, errSF
			}
			dot = true
		default:
			break scan
		}
		if digits++; (!dot && digits > 15) || digits > 16 {
			return sfBare{}, errSF
		}
	}
	if !dot {
		if neg {
			v = -v
		}
		return sfBare{kind: sfInteger, i: v}, nil
	}
	if fracDigits == 0 || fracDigits > 3 {
		return sfBare{}, errSF
	}
	for range 3 - fracDigits {
		frac *= 10
	}
	v = v*1000 + frac
	if neg {
		v = -v
	}
	return sfBare{kind: sfDecimal, i: v}, nil
}

// str parses a String (section 4.2.5).
func (p *sfParser) str() (sfBare, error) {
	p.i++ // '"'
	var b strings.Builder
	start := p.i
	for ; !p.eof(); p.i++ {
		switch c := p.s[p.i]; {
		case c == '\\':
			b.WriteString(p.s[start:p.i])
			p.i++
			if c := p.peek(); c != '"' && c != '\\' {
				return sfBare{}, errSF
			}
			start = p.i
		case c == '"':
			s := p.s[start:p.i]
			if b.Len() > 0 {
				b.WriteString(s)
				s = b.String()
			}
			p.i++
			return sfBare{kind: sfString, s: s}, nil
		case c < 0x20 || c > 0x7e:
			return sfBare{}, errSF
		}
	}
	return sfBare{}, errSF
}

// token parses a Token (section 4.2.6); the first character was checked.
func (p *sfParser) token() sfBare {
	start := p.i
	for p.i++; !p.eof() && isTokenChar(p.s[p.i]); p.i++ {
	}
	return sfBare{kind: sfToken, s: p.s[start:p.i]}
}

// isTokenChar: tchar, ':' or '/'.
func isTokenChar(c byte) bool {
	if isDigit(c) || isAlpha(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}

// binary parses a Byte Sequence (section 4.2.7).
func (p *sfParser) binary() (sfBare, error) {
	p.i++ // ':'
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return sfBare{}, errSF
	}
	b64 := p.s[p.i : p.i+end]
	p.i += end + 1
	for i := 0; i < len(b64); i++ {
		if c := b64[i]; !isDigit(c) && !isAlpha(c) && c != '+' && c != '/' && c != '=' {
			return sfBare{}, errSF
		}
	}
	out, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		// Padding may be left out (the RFC lets parsers accept it).
		if out, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(b64, "=")); err != nil {
			return sfBare{}, errSF
		}
	}
	return sfBare{kind: sfBinary, s: string(out)}, nil
}

// boolean parses a Boolean (section 4.2.8).
func (p *sfParser) boolean() (sfBare, error) {
	p.i++ // '?'
	switch p.peek() {
	case '1':
		p.i++
		return sfBare{kind: sfBoolean, i: 1}, nil
	case '0':
		p.i++
		return sfBare{kind: sfBoolean}, nil
	}
	return sfBare{}, errSF
}

// displayString parses a Display String (section 4.2.10): printable ASCII
// and lowercase percent-encoded bytes, which must form UTF-8.
func (p *sfParser) displayString() (sfBare, error) {
	p.i++ // '%'
	if p.peek() != '"' {
		return sfBare{}, errSF
	}
	p.i++
	var b []byte
	for ; !p.eof(); p.i++ {
		switch c := p.s[p.i]; {
		case c < 0x20 || c > 0x7e:
			return sfBare{}, errSF
		case c == '%':
			if p.i+2 >= len(p.s) {
				return sfBare{}, errSF
			}
			hi, ok1 := lowerHex(p.s[p.i+1])
			lo, ok2 := lowerHex(p.s[p.i+2])
			if !ok1 || !ok2 {
				return sfBare{}, errSF
			}
			b = append(b, hi<<4|lo)
			p.i += 2
		case c == '"':
			p.i++
			if !utf8.Valid(b) {
				return sfBare{}, errSF
			}
			return sfBare{kind: sfDisplayString, s: string(b)}, nil
		default:
			b = append(b, c)
		}
	}
	return sfBare{}, errSF
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case isDigit(c):
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
