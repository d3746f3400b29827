package detgen

import "strings"

// The scanners here find, in a template's source, the positions that
// text/template/parse does not record: where an operand ends and where an
// action closes. They know the default delimiters only (Helm uses no other)
// and skip string, raw string and character literals, in which "}}", "|"
// and parentheses mean nothing.

// isSpace is text/template's blank: what separates operands and what a
// trim marker trims.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// skipSpace returns the first position at or after i that is not blank.
func skipSpace(src string, i int) int {
	for i < len(src) && isSpace(src[i]) {
		i++
	}
	return i
}

// literalEnd returns the position after the string, raw string or
// character literal that starts at i, or -1 when it does not end.
func literalEnd(src string, i int) int {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			return j + 1
		}
	}
	return -1
}

// parenEnd returns the position after the parenthesis that closes the one
// at i, or -1.
func parenEnd(src string, i int) int {
	depth := 0
	for j := i; j < len(src); j++ {
		switch c := src[j]; c {
		case '"', '`', '\'':
			end := literalEnd(src, j)
			if end < 0 {
				return -1
			}
			j = end - 1
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}

// operandEnd returns the position after the operand that starts at i: a
// literal, a parenthesised pipeline with any fields after it, or a word
// (a field chain, variable, number, identifier); -1 when it does not end.
func operandEnd(src string, i int) int {
	if i >= len(src) {
		return -1
	}
	switch src[i] {
	case '"', '`', '\'':
		return literalEnd(src, i)
	case '(':
		j := parenEnd(src, i)
		for j > 0 && j < len(src) && src[j] == '.' {
			j++
			for j < len(src) && isWordByte(src[j]) {
				j++
			}
		}
		return j
	}
	j := i
	for j < len(src) && !isSpace(src[j]) && !strings.ContainsRune("()|,", rune(src[j])) && !strings.HasPrefix(src[j:], "}}") {
		j++
	}
	return j
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// actionClose finds the end of the action that i is inside of: content is
// where its pipeline ends (before the blanks and the trim marker ahead of
// the delimiter), end where the closing delimiter ends, and trim says it
// trims the text after it ("-}}"). ok is false when the action does not
// close.
func actionClose(src string, i int) (content, end int, trim, ok bool) {
	for j := i; j < len(src); j++ {
		switch c := src[j]; {
		case c == '"' || c == '`' || c == '\'':
			e := literalEnd(src, j)
			if e < 0 {
				return 0, 0, false, false
			}
			j = e - 1
		case strings.HasPrefix(src[j:], "}}"):
			content = j
			if j >= 2 && src[j-1] == '-' && isSpace(src[j-2]) {
				content, trim = j-1, true
			}
			for content > i && isSpace(src[content-1]) {
				content--
			}
			return content, j + 2, trim, true
		}
	}
	return 0, 0, false, false
}

// leftTrims says whether an action that starts at i trims the text before
// it ("{{- ").
func leftTrims(src string, i int) bool {
	return strings.HasPrefix(src[i:], "{{-") && i+3 < len(src) && isSpace(src[i+3])
}
