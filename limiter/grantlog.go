package limiter

// grantLog is the memory of the windows that slide: SlidingLog keys its
// grants by instant, SlidingWindow by segment. It keeps one entry per key
// that holds grants, oldest first, in a ring buffer that doubles when full
// and shrinks to fit once it has stayed at most a quarter full for a whole
// window (span keys): its memory follows the live entries, not the largest
// number it ever held, and a log that drains and fills again within a
// window, as bursty demand makes it do, keeps its ring instead of
// reallocating at every burst.
//
// Each entry stores the cumulative count of the permits granted through it
// since the log began, not its own count. The permits in the log are then a
// difference, and the question a refused request asks (when have enough of
// the oldest grants left for it to fit?) is a binary search: no decision
// walks the log. Cumulative counts are kept modulo 2^64: their differences
// are exact as long as the permits in the log fit in an int64, which the
// limit guarantees.
type grantLog struct {
	ents       []grantEntry // ring buffer; its length is 0 or a power of two
	head, size int
	gone       uint64 // cumulative count before the oldest entry
	sum        uint64 // cumulative count through the newest entry
	span       int64  // the window, in keys
	low        bool   // the ring has been at most a quarter full since lowAt
	lowAt      int64  // the expiry cursor when it became so
}

type grantEntry struct {
	key int64  // the instant or segment of the grants; strictly increasing
	cum uint64 // permits granted through this entry since the log began
}

// minLogCap is the smallest ring a log that holds entries keeps.
const minLogCap = 8

// total returns the permits in the log.
func (l *grantLog) total() int64 { return int64(l.sum - l.gone) }

func (l *grantLog) at(i int) *grantEntry { return &l.ents[(l.head+i)&(len(l.ents)-1)] }

// before returns the cumulative count before entry i.
func (l *grantLog) before(i int) uint64 {
	if i == 0 {
		return l.gone
	}
	return l.at(i - 1).cum
}

// add records n permits at key. A key at or before the newest one's counts
// as the newest: the grants merge into one entry, and, if the key was
// earlier, are kept later than they were made, on the safe side.
func (l *grantLog) add(key, n int64) {
	if n <= 0 {
		return
	}
	l.sum += uint64(n)
	if l.size > 0 {
		if last := l.at(l.size - 1); key <= last.key {
			last.cum = l.sum
			return
		}
	}
	if l.size == len(l.ents) {
		l.resize(max(2*len(l.ents), minLogCap))
	}
	*l.at(l.size) = grantEntry{key: key, cum: l.sum}
	l.size++
	if l.low && l.size > len(l.ents)/4 {
		l.low = false
	}
}

// newest returns the newest entry's key and permits; ok is false when the
// log is empty.
func (l *grantLog) newest() (key, n int64, ok bool) {
	if l.size == 0 {
		return 0, 0, false
	}
	last := l.at(l.size - 1)
	return last.key, int64(last.cum - l.before(l.size-1)), true
}

// untake takes n permits (at most the newest entry's) back out of the
// newest entry, dropping the entry when that empties it. The ring stays as
// it is: the next expire sees to its size.
func (l *grantLog) untake(n int64) {
	if n <= 0 || l.size == 0 {
		return
	}
	last := l.at(l.size - 1)
	last.cum -= uint64(n)
	l.sum -= uint64(n)
	if last.cum == l.before(l.size-1) {
		l.size--
	}
}

// giveBack takes up to n permits out of the entry of key, if the log
// holds it: out of its count and the cumulative counts after it. An entry
// left empty stays (unless it is the newest) until it expires. It costs
// O(entries after key).
func (l *grantLog) giveBack(key, n int64) {
	lo, hi := 0, l.size
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if l.at(mid).key < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == l.size || l.at(lo).key != key || n <= 0 {
		return
	}
	m := uint64(min(n, int64(l.at(lo).cum-l.before(lo))))
	for i := lo; i < l.size; i++ {
		l.at(i).cum -= m
	}
	l.sum -= m
	for l.size > 0 && l.at(l.size-1).cum == l.before(l.size-1) {
		l.size--
	}
}

// expire drops the entries whose key is at most upTo. It finds the first
// entry to keep by a galloping search from the oldest: O(log k) for k
// entries dropped, so a steady stream of grants, each expiring about one
// entry, pays O(1), and a log that expires at once pays O(log n).
func (l *grantLog) expire(upTo int64) {
	lo, step := 0, 1 // the entries before lo have key <= upTo
	for lo+step <= l.size && l.at(lo+step-1).key <= upTo {
		lo += step
		step *= 2
	}
	hi := min(lo+step-1, l.size) // the first entry to keep is in [lo, hi]
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if l.at(mid).key > upTo {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo > 0 {
		l.gone = l.at(lo - 1).cum
		l.head = (l.head + lo) & (len(l.ents) - 1)
		l.size -= lo
	}
	l.shrink(upTo)
}

// keyFreeing returns the key of the oldest entry whose leaving, with every
// entry older than it, takes at least excess permits out of the log; ok is
// false when the whole log holds fewer.
func (l *grantLog) keyFreeing(excess uint64) (key int64, ok bool) {
	lo, hi := 0, l.size
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if l.at(mid).cum-l.gone >= excess {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == l.size {
		return 0, false
	}
	return l.at(lo).key, true
}

// shrink, called by expire with its cursor upTo (which never decreases),
// shrinks the ring once it has been at most a quarter full for span keys:
// to the smallest power of two at least minLogCap that leaves it at least
// a quarter and at most half full, so that growing again takes as many
// entries as it holds.
func (l *grantLog) shrink(upTo int64) {
	c := len(l.ents)
	if c <= minLogCap || l.size > c/4 {
		l.low = false
		return
	}
	if !l.low {
		l.low, l.lowAt = true, upTo
		return
	}
	// upTo-lowAt cannot wrap: both lie in [-span, MaxInt64-span].
	if upTo-l.lowAt < l.span {
		return
	}
	for c > minLogCap && l.size <= c/4 {
		c /= 2
	}
	l.resize(c)
	l.low = false
}

// resize moves the entries into a ring of c >= size entries, c a power of two.
func (l *grantLog) resize(c int) {
	ents := make([]grantEntry, c)
	for i := range l.size {
		ents[i] = *l.at(i)
	}
	l.ents, l.head = ents, 0
}
