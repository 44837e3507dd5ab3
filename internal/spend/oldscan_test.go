package spend

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/bits"
	"sync"
	"unicode/utf8"
)

// This file is the hand-written JSON scanner spend used before it read
// JSON with encoding/json and gjson, kept only for BenchmarkFields to
// compare the two in one run.

// A scanner reads a few members of a JSON object — those its schema
// names — from the bytes of the object as they come, in as many writes as
// they come in, with its memory bounded whatever the input, and without
// allocating (but past 128 levels of nesting, and to unescape a name or
// string that is written with escapes). It checks the whole input is one
// JSON value as encoding/json checks it, and holds no byte of it but the
// members it reads: their strings (up to maxString bytes), integers and
// whether their objects were present. The zero scanner is not ready: see
// reset.
//
// The members are read as encoding/json would read them into a struct
// whose fields are tagged with their names — string fields, *int64 fields
// and pointers to structs; the last of duplicate members wins; null
// leaves a string as it was and empties an integer or an object; a member
// of the wrong kind (a number where a string is read, an integer with a
// fraction or out of int64's range) makes the input invalid, as it makes
// json.Unmarshal fail — with one difference: a member is read only when
// its name is matched exactly, where encoding/json also takes a name that
// equals it case-insensitively ("MODEL" for "model"). The Anthropic API
// matches names exactly, so exact matching reads what the API will; a
// member whose name matches only case-insensitively is noted on the slot
// (fold), kind-checked as encoding/json would, and its integers counted
// in top, so that a caller can take the safe side.
type scanner struct {
	scanState
	// slots hold what was read of each member, strs the strings; key is
	// the key under way. Only the slots of the schema are cleared for a
	// new input: the buffers are read only up to what was written.
	slots [maxMembers]slot
	key   [maxKey]byte
	strs  [maxStrings][maxString]byte
}

// scanState is the state of a scanner's input, cleared for a new one.
type scanState struct {
	sch   []member
	state uint8
	// typeErr is set when a member read is of the wrong kind, or the
	// top-level value is not an object (or null).
	typeErr bool
	closed  bool
	// depth is the number of open objects and arrays; bit d of arr (and
	// past 128, of deep) is set when the container at depth d+1 is an
	// array.
	depth int
	arr   [2]uint64
	deep  []uint64
	// track[d] is the member whose object is open at depth d (parentTop
	// for the top-level object), or untracked.
	track [maxTrack + 1]int8
	// vnode is the member the next value is of (noMember, or topValue),
	// and vexact whether its name matched exactly.
	vnode  int8
	vexact bool
	// cur and curExact are the member the string or number under way is
	// of (noMember: none), and whether its name matched exactly.
	cur      int8
	curExact bool
	// The key under way, when it is one of a tracked object: inKey while
	// in it, and keyOn when its bytes are kept in key.
	inKey, keyOn, keyLong, keyEsc bool
	keyLen                        int
	// pend is the member the last key named (noMember: none).
	pend      int8
	pendExact bool
	// The number under way, when it is a member's: its digits so far,
	// its sign, and whether it overflowed or has a fraction or exponent.
	num                    uint64
	numNeg, numOver, numFr bool
	// lit is the rest of the literal under way; hex the hex digits to go
	// in a \u escape.
	lit string
	hex int
}

// member is one member a scanner reads.
type member struct {
	name string
	kind kind
	// parent is the member, an object, this one is a member of, or
	// parentTop for a member of the top-level object. A member comes after
	// its parent in its schema.
	parent int8
	// buf is a string member's buffer in strs.
	buf int8
}

// kind is the kind of value a member holds.
type kind uint8

const (
	kindString kind = iota + 1
	kindInt
	kindObject
)

// slot is what was read of one member.
type slot struct {
	// set is true when the member was read and not emptied by null since:
	// a string or integer, or an object begun.
	set bool
	// fold is true when a member whose name equals this one's only
	// case-insensitively was seen (and not read).
	fold bool
	// long is true when the string was over maxString bytes, and not
	// kept; esc when it holds an escape.
	long, esc bool
	// n is an integer member's value; top the largest integer of any
	// member of this name, exactly or case-insensitively (topSet: any).
	topSet bool
	strLen int
	n, top int64
}

// Bounds of a scanner.
const (
	// maxMembers and maxStrings bound the members and string members of a
	// schema.
	maxMembers = 17
	maxStrings = 2
	// maxTrack is the deepest object a schema reads members of; the
	// top-level object is at depth 1.
	maxTrack = 4
	// maxString is the longest string a scanner keeps, in bytes as they
	// are written in the JSON; a longer one is noted long.
	maxString = 256
	// maxKey is the longest key kept: every name of a schema, each of its
	// characters escaped (\u212A, six bytes, folds to k).
	maxKey = 6 * 28
	// maxNesting is encoding/json's bound on nesting.
	maxNesting = 10000
)

const (
	parentTop int8 = -1 // member.parent and track: the top-level object
	untracked int8 = -2 // track: an object none of whose members are read
	noMember  int8 = -1 // vnode, cur, pend: a value of no member read
	topValue  int8 = -3 // vnode: the top-level value
)

// Scanner states.
const (
	sValue    uint8 = iota // a value is expected
	sArrFirst              // after '[': a value or ']'
	sObjFirst              // after '{': a key or '}'
	sKey                   // after ',' in an object: a key
	sColon                 // after a key
	sAfter                 // after a value
	sEnd                   // after the top-level value: only white space
	sStr                   // in a string
	sEsc                   // after a backslash in a string
	sHex                   // in a \u escape
	sMinus                 // number: after '-'
	sZero                  // number: after a leading 0
	sInt                   // number: in the integer part
	sDot                   // number: after '.'
	sFrac                  // number: in the fraction
	sE                     // number: after 'e'
	sESign                 // number: after the exponent's sign
	sExp                   // number: in the exponent
	sLit                   // in true, false or null
	sErr                   // not JSON
)

// Schemas. Indices of members that callers read are named.

// requestSchema reads a Messages request's model and max_tokens.
var requestSchema = []member{
	reqModel:     {name: "model", kind: kindString, parent: parentTop},
	reqMaxTokens: {name: "max_tokens", kind: kindInt, parent: parentTop},
}

const (
	reqModel = iota
	reqMaxTokens
)

// answerSchema reads a Messages answer's model and usage.
var answerSchema = []member{
	ansModel:                  {name: "model", kind: kindString, parent: parentTop},
	ansUsage:                  {name: "usage", kind: kindObject, parent: parentTop},
	ansUsage + uInput:         {name: "input_tokens", kind: kindInt, parent: ansUsage},
	ansUsage + uOutput:        {name: "output_tokens", kind: kindInt, parent: ansUsage},
	ansUsage + uCacheWrite:    {name: "cache_creation_input_tokens", kind: kindInt, parent: ansUsage},
	ansUsage + uCacheRead:     {name: "cache_read_input_tokens", kind: kindInt, parent: ansUsage},
	ansUsage + uCacheCreation: {name: "cache_creation", kind: kindObject, parent: ansUsage},
	ansUsage + uEphemeral1h:   {name: "ephemeral_1h_input_tokens", kind: kindInt, parent: ansUsage + uCacheCreation},
}

const (
	ansModel = iota
	ansUsage
)

// Offsets of a usage object's members from the usage member.
const (
	uInput = iota + 1
	uOutput
	uCacheWrite
	uCacheRead
	uCacheCreation
	uEphemeral1h
)

// eventSchema reads a message_start or message_delta event's data: its
// type, the message's model and usage, and the usage.
var eventSchema = []member{
	evType:                          {name: "type", kind: kindString, parent: parentTop},
	evMessage:                       {name: "message", kind: kindObject, parent: parentTop},
	evModel:                         {name: "model", kind: kindString, parent: evMessage, buf: 1},
	evMessageUsage:                  {name: "usage", kind: kindObject, parent: evMessage},
	evMessageUsage + uInput:         {name: "input_tokens", kind: kindInt, parent: evMessageUsage},
	evMessageUsage + uOutput:        {name: "output_tokens", kind: kindInt, parent: evMessageUsage},
	evMessageUsage + uCacheWrite:    {name: "cache_creation_input_tokens", kind: kindInt, parent: evMessageUsage},
	evMessageUsage + uCacheRead:     {name: "cache_read_input_tokens", kind: kindInt, parent: evMessageUsage},
	evMessageUsage + uCacheCreation: {name: "cache_creation", kind: kindObject, parent: evMessageUsage},
	evMessageUsage + uEphemeral1h:   {name: "ephemeral_1h_input_tokens", kind: kindInt, parent: evMessageUsage + uCacheCreation},
	evUsage:                         {name: "usage", kind: kindObject, parent: parentTop},
	evUsage + uInput:                {name: "input_tokens", kind: kindInt, parent: evUsage},
	evUsage + uOutput:               {name: "output_tokens", kind: kindInt, parent: evUsage},
	evUsage + uCacheWrite:           {name: "cache_creation_input_tokens", kind: kindInt, parent: evUsage},
	evUsage + uCacheRead:            {name: "cache_read_input_tokens", kind: kindInt, parent: evUsage},
	evUsage + uCacheCreation:        {name: "cache_creation", kind: kindObject, parent: evUsage},
	evUsage + uEphemeral1h:          {name: "ephemeral_1h_input_tokens", kind: kindInt, parent: evUsage + uCacheCreation},
}

const (
	evType = iota
	evMessage
	evModel
	evMessageUsage
	evUsage = evMessageUsage + uEphemeral1h + 1
)

// getScanner returns a scanner of sch from pool (nil: a new one).
func getScanner(pool *sync.Pool, sch []member) *scanner {
	var s *scanner
	if pool != nil {
		s, _ = pool.Get().(*scanner)
	}
	if s == nil {
		s = new(scanner)
	}
	s.reset(sch)
	return s
}

// putScanner returns s, when not nil, to pool (when not nil).
func putScanner(pool *sync.Pool, s *scanner) {
	if pool != nil && s != nil {
		pool.Put(s)
	}
}

// reset readies s to read a new input with sch.
func (s *scanner) reset(sch []member) {
	s.scanState = scanState{sch: sch, deep: s.deep[:0], vnode: topValue, cur: noMember, pend: noMember}
	s.track[0] = untracked
	clear(s.slots[:len(sch)])
}

// close ends the input, and reports whether it was one JSON value with
// every member read of its kind. Writes after it are ignored.
func (s *scanner) close() bool {
	if !s.closed {
		s.closed = true
		switch s.state {
		case sZero, sInt, sFrac, sExp:
			s.endNumber()
		}
		if s.state == sAfter && s.depth == 0 {
			s.state = sEnd
		}
		if s.state != sEnd {
			s.state = sErr
		}
	}
	return s.state == sEnd && !s.typeErr
}

// str returns member i's string as written, escapes and all, and false
// when it was not read, or was too long to keep.
func (s *scanner) str(i int) ([]byte, bool) {
	sl := &s.slots[i]
	if !sl.set || sl.long {
		return nil, false
	}
	return s.strs[s.sch[i].buf][:sl.strLen], true
}

// text returns member i's string, and false when it was not read or was
// too long to keep. It allocates only for the string it returns.
func (s *scanner) text(i int) (string, bool) {
	raw, ok := s.str(i)
	if !ok {
		return "", false
	}
	if !s.slots[i].esc && utf8.Valid(raw) {
		return string(raw), true
	}
	return unquote(raw), true
}

// is reports whether member i's string was read and is v.
func (s *scanner) is(i int, v string) bool {
	raw, ok := s.str(i)
	if !ok {
		return false
	}
	if !s.slots[i].esc {
		return string(raw) == v
	}
	return unquote(raw) == v
}

// unquote is the string raw, valid JSON string contents, stands for, as
// encoding/json reads it (invalid UTF-8 and lone surrogates read as
// U+FFFD).
func unquote(raw []byte) string {
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var v string
	_ = json.Unmarshal(q, &v)
	return v
}

// usage sets each of t's counts that the usage object of member u holds.
func (s *scanner) usage(u int, t *Tokens) {
	set := func(to *int64, i int) {
		if sl := &s.slots[u+i]; sl.set && sl.n >= 0 {
			*to = sl.n
		}
	}
	set(&t.Input, uInput)
	set(&t.Output, uOutput)
	set(&t.CacheWrite, uCacheWrite)
	set(&t.CacheRead, uCacheRead)
	set(&t.CacheWrite1h, uEphemeral1h)
}

// write reads p, the next bytes of the input.
func (s *scanner) write(p []byte) {
	if s.closed {
		return
	}
	i := 0
	for i < len(p) {
		switch s.state {
		case sStr:
			i = s.inString(p, i)
		case sValue, sArrFirst, sObjFirst, sKey, sColon, sAfter, sEnd:
			for i < len(p) && isSpace[p[i]] {
				i++
			}
			if i < len(p) {
				i = s.token(p, i)
			}
		case sEsc:
			c := p[i]
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.state = sStr
			case 'u':
				s.state, s.hex = sHex, 4
			default:
				s.fail()
				return
			}
			s.keep(p[i : i+1])
			i++
		case sHex:
			if !isHex(p[i]) {
				s.fail()
				return
			}
			s.keep(p[i : i+1])
			i++
			if s.hex--; s.hex == 0 {
				s.state = sStr
			}
		case sMinus, sZero, sInt, sDot, sFrac, sE, sESign, sExp:
			i = s.number(p, i)
		case sLit:
			for i < len(p) && len(s.lit) > 0 {
				if p[i] != s.lit[0] {
					s.fail()
					return
				}
				s.lit = s.lit[1:]
				i++
			}
			if len(s.lit) == 0 {
				s.state = sAfter
			}
		default: // sErr
			return
		}
	}
}

func (s *scanner) fail() { s.state = sErr }

// token reads the token that begins at p[i], not white space, and returns
// the index after what it read.
func (s *scanner) token(p []byte, i int) int {
	c := p[i]
	switch s.state {
	case sColon:
		if c != ':' {
			s.fail()
			return len(p)
		}
		s.state, s.vnode, s.vexact = sValue, s.pend, s.pendExact
		return i + 1
	case sObjFirst, sKey:
		switch {
		case c == '"':
			s.beginKey()
			return i + 1
		case c == '}' && s.state == sObjFirst:
			s.pop()
			return i + 1
		}
		s.fail()
		return len(p)
	case sAfter:
		if s.depth == 0 { // something after the top-level value
			s.fail()
			return len(p)
		}
		arr := s.inArray()
		switch {
		case c == ',' && arr:
			s.state, s.vnode = sValue, noMember
		case c == ',':
			s.state = sKey
		case c == ']' && arr, c == '}' && !arr:
			s.pop()
		default:
			s.fail()
			return len(p)
		}
		return i + 1
	case sEnd:
		s.fail()
		return len(p)
	case sArrFirst:
		if c == ']' {
			s.pop()
			return i + 1
		}
	}
	return s.value(p, i)
}

// value begins the value at p[i] and returns the index after what it read.
func (s *scanner) value(p []byte, i int) int {
	node, exact := s.vnode, s.vexact
	s.vnode, s.vexact = noMember, false
	c := p[i]
	switch {
	case c == '{':
		s.typed(node, kindObject)
		if !s.push(false) {
			return len(p)
		}
		t := untracked
		switch {
		case node == topValue:
			t = parentTop
		case node >= 0 && exact && s.sch[node].kind == kindObject:
			t = node
			s.slots[node].set = true
		}
		if s.depth <= maxTrack {
			s.track[s.depth] = t
		}
		s.state = sObjFirst
	case c == '[':
		s.typed(node, 0)
		if !s.push(true) {
			return len(p)
		}
		if s.depth <= maxTrack {
			s.track[s.depth] = untracked
		}
		s.state = sArrFirst
	case c == '"':
		s.typed(node, kindString)
		s.cur = noMember
		if node >= 0 && exact && s.sch[node].kind == kindString {
			s.cur = node
			sl := &s.slots[node]
			sl.set, sl.long, sl.esc, sl.strLen = true, false, false, 0
		}
		s.inKey = false
		s.state = sStr
	case c == '-' || '0' <= c && c <= '9':
		s.typed(node, kindInt)
		s.cur, s.curExact = noMember, false
		if node >= 0 && s.sch[node].kind == kindInt {
			s.cur, s.curExact = node, exact
		}
		s.num, s.numNeg, s.numOver, s.numFr = 0, false, false, false
		switch {
		case c == '-':
			s.state, s.numNeg = sMinus, true
		case c == '0':
			s.state = sZero
		default:
			s.state, s.num = sInt, uint64(c-'0')
		}
	case c == 't':
		s.typed(node, 0)
		s.state, s.lit = sLit, "rue"
	case c == 'f':
		s.typed(node, 0)
		s.state, s.lit = sLit, "alse"
	case c == 'n':
		if node >= 0 && exact {
			s.null(node)
		}
		s.state, s.lit = sLit, "ull"
	default:
		s.fail()
		return len(p)
	}
	return i + 1
}

// typed notes a value of kind k (0: an array or a boolean) for member
// node: of the wrong kind, it is an error as it is for encoding/json.
func (s *scanner) typed(node int8, k kind) {
	switch {
	case node == topValue:
		if k != kindObject {
			s.typeErr = true
		}
	case node >= 0 && s.sch[node].kind != k:
		s.typeErr = true
	}
}

// null empties member node, as encoding/json's null sets a pointer nil:
// an integer, and an object with its members. A string is left as it is.
func (s *scanner) null(node int8) {
	if s.sch[node].kind == kindString {
		return
	}
	var gone [maxMembers]bool
	gone[node] = true
	s.slots[node].set = false
	for i := int(node) + 1; i < len(s.sch); i++ {
		if p := s.sch[i].parent; p >= 0 && gone[p] {
			gone[i] = true
			s.slots[i].set = false
		}
	}
}

func (s *scanner) beginKey() {
	s.inKey, s.state = true, sStr
	s.keyOn = s.depth <= maxTrack && s.track[s.depth] != untracked
	s.keyLen, s.keyLong, s.keyEsc = 0, false, false
	s.cur = noMember
}

// inString reads string contents from p[i] and returns the index after
// what it read.
func (s *scanner) inString(p []byte, i int) int {
	j := i + plainRun(p[i:])
	if s.inKey && s.keyOn || s.cur >= 0 {
		s.keep(p[i:j])
	}
	if j == len(p) {
		return j
	}
	switch p[j] {
	case '"':
		if s.inKey {
			s.endKey()
			s.state = sColon
		} else {
			s.state = sAfter
		}
		return j + 1
	case '\\':
		if s.inKey {
			s.keyEsc = true
		} else if s.cur >= 0 {
			s.slots[s.cur].esc = true
		}
		s.keep(p[j : j+1])
		s.state = sEsc
		return j + 1
	}
	s.fail() // a control character
	return len(p)
}

// keep keeps b, the next bytes of the key or string under way, when they
// are kept.
func (s *scanner) keep(b []byte) {
	switch {
	case s.inKey:
		if !s.keyOn || s.keyLong {
			return
		}
		if s.keyLen+len(b) > maxKey {
			s.keyLong = true
			return
		}
		s.keyLen += copy(s.key[s.keyLen:], b)
	case s.cur >= 0:
		sl := &s.slots[s.cur]
		if sl.long {
			return
		}
		if sl.strLen+len(b) > maxString {
			sl.long = true
			return
		}
		sl.strLen += copy(s.strs[s.sch[s.cur].buf][sl.strLen:], b)
	}
}

// endKey finds the member the key just read names.
func (s *scanner) endKey() {
	s.inKey = false
	s.pend, s.pendExact = noMember, false
	if !s.keyOn || s.keyLong {
		return
	}
	k := s.key[:s.keyLen]
	if s.keyEsc {
		k = []byte(unquote(k))
	}
	if len(k) == 0 {
		return
	}
	// As encoding/json does, a name that matches exactly is read; when
	// none does, one that matches case-insensitively is kind-checked and
	// noted, but not read. Only K (U+212A) and ſ (U+017F) fold to ASCII
	// letters, and they are longer: a key that folds to a name is as
	// long, or longer and not ASCII.
	parent, c, fold := s.track[s.depth], k[0], noMember
	for i := range s.sch {
		m := &s.sch[i]
		if m.parent != parent || len(k) < len(m.name) {
			continue
		}
		if len(k) == len(m.name) && c == m.name[0] && string(k) == m.name {
			s.pend, s.pendExact = int8(i), true
			return
		}
		if fold == noMember && (c|0x20 == m.name[0] || c == m.name[0] || c >= utf8.RuneSelf) &&
			(len(k) == len(m.name) || hasNonASCII(k)) && bytes.EqualFold(k, []byte(m.name)) {
			fold = int8(i)
		}
	}
	if fold != noMember {
		s.pend = fold
		s.slots[fold].fold = true
	}
}

// number reads number bytes from p[i] and returns the index after what it
// read; the number ends at the first byte that cannot continue it.
func (s *scanner) number(p []byte, i int) int {
	for i < len(p) {
		c := p[i]
		digit := '0' <= c && c <= '9'
		switch s.state {
		case sMinus:
			switch {
			case c == '0':
				s.state = sZero
			case digit:
				s.state, s.num = sInt, uint64(c-'0')
			default:
				s.fail()
				return len(p)
			}
		case sZero:
			switch c {
			case '.':
				s.state = sDot
			case 'e', 'E':
				s.state = sE
			default:
				s.endNumber()
				return i
			}
		case sInt:
			for ; i < len(p) && '0' <= p[i] && p[i] <= '9'; i++ {
				if s.num > (math.MaxUint64-9)/10 {
					s.numOver = true
				} else {
					s.num = s.num*10 + uint64(p[i]-'0')
				}
			}
			if i == len(p) {
				return i
			}
			switch p[i] {
			case '.':
				s.state = sDot
			case 'e', 'E':
				s.state = sE
			default:
				s.endNumber()
				return i
			}
		case sDot:
			if !digit {
				s.fail()
				return len(p)
			}
			s.state = sFrac
		case sFrac, sExp:
			switch {
			case digit:
			case (c == 'e' || c == 'E') && s.state == sFrac:
				s.state = sE
			default:
				s.endNumber()
				return i
			}
		case sE:
			switch {
			case c == '+' || c == '-':
				s.state = sESign
			case digit:
				s.state = sExp
			default:
				s.fail()
				return len(p)
			}
		case sESign:
			if !digit {
				s.fail()
				return len(p)
			}
			s.state = sExp
		}
		if s.state == sDot || s.state == sE {
			s.numFr = true
		}
		i++
	}
	return i
}

// endNumber ends the number under way, and reads it when it is a
// member's.
func (s *scanner) endNumber() {
	s.state = sAfter
	if s.cur < 0 {
		return
	}
	node := s.cur
	s.cur = noMember
	limit := uint64(math.MaxInt64)
	if s.numNeg {
		limit++
	}
	if s.numFr || s.numOver || s.num > limit {
		s.typeErr = true // json: cannot unmarshal number into int64
		return
	}
	v := int64(s.num)
	if s.numNeg {
		v = -v
	}
	sl := &s.slots[node]
	if s.curExact {
		sl.set, sl.n = true, v
	}
	if !sl.topSet || v > sl.top {
		sl.top, sl.topSet = v, true
	}
}

// push opens a container, or fails past maxNesting.
func (s *scanner) push(array bool) bool {
	if s.depth >= maxNesting {
		s.fail()
		return false
	}
	d := s.depth
	s.depth++
	var w *uint64
	if d < 128 {
		w = &s.arr[d>>6]
	} else {
		k := (d - 128) >> 6
		for len(s.deep) <= k {
			s.deep = append(s.deep, 0)
		}
		w = &s.deep[k]
	}
	if array {
		*w |= 1 << (d & 63)
	} else {
		*w &^= 1 << (d & 63)
	}
	return true
}

// pop closes the innermost container.
func (s *scanner) pop() {
	s.depth--
	s.state = sAfter
}

// inArray reports whether the innermost container is an array.
func (s *scanner) inArray() bool {
	d := s.depth - 1
	if d < 128 {
		return s.arr[d>>6]&(1<<(d&63)) != 0
	}
	return s.deep[(d-128)>>6]&(1<<(d&63)) != 0
}

func hasNonASCII(p []byte) bool {
	for _, c := range p {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// plainRun is how many bytes p begins with that a string holds as they
// are: none a quote, a backslash or a control character. It looks at 8
// bytes at a time, and past the first 16 at 32.
func plainRun(p []byte) int {
	i := 0
	for ; i < 16 && i+8 <= len(p); i += 8 { // most strings are short
		if m := special(binary.LittleEndian.Uint64(p[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i+32 <= len(p); i += 32 {
		q := p[i : i+32]
		m0, m1 := special(binary.LittleEndian.Uint64(q)), special(binary.LittleEndian.Uint64(q[8:]))
		m2, m3 := special(binary.LittleEndian.Uint64(q[16:])), special(binary.LittleEndian.Uint64(q[24:]))
		if m0|m1|m2|m3 != 0 {
			switch {
			case m0 != 0:
				return i + bits.TrailingZeros64(m0)>>3
			case m1 != 0:
				return i + 8 + bits.TrailingZeros64(m1)>>3
			case m2 != 0:
				return i + 16 + bits.TrailingZeros64(m2)>>3
			}
			return i + 24 + bits.TrailingZeros64(m3)>>3
		}
	}
	for ; i+8 <= len(p); i += 8 {
		if m := special(binary.LittleEndian.Uint64(p[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' {
			break
		}
	}
	return i
}

// special has the high bit set of each byte of w (little-endian) that is
// under 0x20, a quote or a backslash. A false one can only follow a true
// one, so the lowest is right.
func special(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return ((w - ones*0x20) | ((w ^ ones*'"') - ones) | ((w ^ ones*'\\') - ones)) &^ w & highs
}

// request ends a Messages body's input and sets est's model and output
// bound from what s read of it, as spend did with the scanner.
func (s *scanner) request(est *Estimate) {
	if !s.close() {
		return
	}
	if !s.slots[reqModel].fold {
		est.Model, _ = s.text(reqModel)
	}
	switch sl := &s.slots[reqMaxTokens]; {
	case sl.fold:
		if sl.topSet {
			est.Output = max(est.Output, sl.top)
		}
	case sl.set && sl.n >= 0:
		est.Output = sl.n
	}
}
