package steady

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A template is what two renders of one string field have in common: the
// runs of text they share, in order, with a gap wherever they differ. A
// chart often generates a value inside a string it otherwise renders from
// its values (`admin_password = RANDOM` beside `title = {{ .Values.title
// }}` in one config file): the field is volatile, but a change to the
// title is real, and must not hide behind the password. Keep keeps the
// previous output only when the previous value fits the template: equal
// to the new one everywhere but in the gaps, and in each gap of the
// punctuation that one of the renders had there.
//
// The renders are compared token by token, a token being a run of
// letters, digits and "+/=_." (so that a generated password, hex digest or
// base64 text with its padding is one token, whose pieces never line up by
// chance with another render's: base64 padding comes and goes with the
// length of a generated key) or any other single character.
type template struct {
	// lits are the shared runs: the prefix, the runs between two gaps,
	// and the suffix, with one gap between each two; at least two. A nil
	// lits means the renders were too big to align (see maxAlign): the
	// template fits no value but the new one.
	lits []string
	// gaps are, for each gap, the punctuation (the characters that are
	// not word characters, in order) of the two renders' text there: a
	// value's text in the gap must have the punctuation of one of them.
	// A generated password is one word, and a line that a value adds
	// beside it is not.
	gaps [][2]string
}

// maxAlign bounds the cells of the alignment table of two renders' tokens
// (their common prefix and suffix aside). Beyond it, a field is compared
// whole, which never hides a change but keeps nothing.
const maxAlign = 1 << 21

// newTemplate returns the template of a and b, two different values of
// one field.
func newTemplate(a, b string) *template {
	ta, tb := tokens(a), tokens(b)
	pre := 0
	for pre < len(ta) && pre < len(tb) && ta[pre] == tb[pre] {
		pre++
	}
	suf := 0
	for suf < len(ta)-pre && suf < len(tb)-pre && ta[len(ta)-1-suf] == tb[len(tb)-1-suf] {
		suf++
	}
	ma, mb := ta[pre:len(ta)-suf], tb[pre:len(tb)-suf]
	if (len(ma)+1)*(len(mb)+1) > maxAlign {
		return &template{}
	}
	var (
		t      template
		cur    strings.Builder
		gap    bool            // a gap is open: the last step was not a shared token
		ga, gb strings.Builder // the punctuation of a and b in the open gap
	)
	closeGap := func() {
		t.lits = append(t.lits, cur.String())
		t.gaps = append(t.gaps, [2]string{ga.String(), gb.String()})
		cur.Reset()
		ga.Reset()
		gb.Reset()
		gap = false
	}
	shared := func(tok string) {
		if gap {
			closeGap()
		}
		cur.WriteString(tok)
	}
	for _, tok := range ta[:pre] {
		shared(tok)
	}
	// l[i][j] is the length of the longest common subsequence of ma[i:]
	// and mb[j:], in one row-major table.
	w := len(mb) + 1
	l := make([]int32, (len(ma)+1)*w)
	for i := len(ma) - 1; i >= 0; i-- {
		for j := len(mb) - 1; j >= 0; j-- {
			switch {
			case ma[i] == mb[j]:
				l[i*w+j] = l[(i+1)*w+j+1] + 1
			case l[(i+1)*w+j] >= l[i*w+j+1]:
				l[i*w+j] = l[(i+1)*w+j]
			default:
				l[i*w+j] = l[i*w+j+1]
			}
		}
	}
	for i, j := 0, 0; i < len(ma) || j < len(mb); {
		switch {
		case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
			shared(ma[i])
			i, j = i+1, j+1
		case j == len(mb) || (i < len(ma) && l[(i+1)*w+j] >= l[i*w+j+1]):
			gap = true
			punctuation(&ga, ma[i])
			i++
		default:
			gap = true
			punctuation(&gb, mb[j])
			j++
		}
	}
	for _, tok := range ta[len(ta)-suf:] {
		shared(tok)
	}
	if gap {
		closeGap()
	}
	t.lits = append(t.lits, cur.String())
	if len(t.lits) == 1 {
		// No gap: a and b differ only in how they split into tokens,
		// which they cannot. Compare whole, to be safe.
		return &template{}
	}
	return &t
}

// fits reports whether s is the template's shared runs, in order, with
// anything in the gaps.
func (t *template) fits(s string) bool {
	if len(t.lits) < 2 {
		return false
	}
	first, last := t.lits[0], t.lits[len(t.lits)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	// The leftmost match of each run leaves the most room for the rest,
	// and the least text in the gap before it.
	s = s[len(first) : len(s)-len(last)]
	for k, lit := range t.lits[1 : len(t.lits)-1] {
		i := strings.Index(s, lit)
		if i < 0 || !t.gapFits(k, s[:i]) {
			return false
		}
		s = s[i+len(lit):]
	}
	return t.gapFits(len(t.lits)-2, s)
}

// gapFits reports whether s, the text of a value in gap k, has the
// punctuation of one of the two renders' text there.
func (t *template) gapFits(k int, s string) bool {
	var b strings.Builder
	for _, tok := range tokens(s) {
		punctuation(&b, tok)
	}
	p := b.String()
	return p == t.gaps[k][0] || p == t.gaps[k][1]
}

// punctuation writes tok to b when it is no word (a single character
// that is not a word character).
func punctuation(b *strings.Builder, tok string) {
	if r, _ := utf8.DecodeRuneInString(tok); !word(r) {
		b.WriteString(tok)
	}
}

// tokens splits s into runs of word characters (letters, digits and
// "+/=_.") and single other characters; joined, they are s.
func tokens(s string) []string {
	var out []string
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			r, size := utf8.DecodeRuneInString(s[n:])
			if !word(r) {
				break
			}
			n += size
		}
		if n == 0 {
			_, n = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func word(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("+/=_.", r)
}
