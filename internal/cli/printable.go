package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printf writes one line of a table or of a text answer. Every argument that is text
// (a string, an error, a Stringer, bytes) may come from an object anyone who may edit
// it wrote — a source's status annotations, a condition's message, another
// replicator's annotations — so it is written printable: a newline or a tab in it
// cannot forge a row or a column, nor an escape sequence hide or recolour one. The
// format, the plugin's own, is written as it is. The tabwriter's Flush (returned by
// print) reports any write error.
func printf(w io.Writer, format string, args ...any) {
	shown := make([]any, len(args))
	for i, arg := range args {
		switch v := arg.(type) {
		case string:
			shown[i] = printable(v)
		case error:
			shown[i] = printable(v.Error())
		case fmt.Stringer:
			shown[i] = printable(v.String())
		case []byte:
			shown[i] = printable(string(v))
		default:
			shown[i] = arg
		}
	}
	_, _ = fmt.Fprintf(w, format, shown...)
}

// printable is s with every character a terminal would act on rather than show
// escaped as strconv.Quote escapes it ("\n", "\t", "\x1b", "\u202e"): control
// characters (C0, DEL, C1), format characters (bidirectional overrides, zero-width
// characters), the line and paragraph separators, and bytes that are not UTF-8
// ("\xff"). Everything else, plain text in any script, is left as it is.
func printable(s string) string {
	if strings.IndexFunc(s, mustEscape) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case mustEscape(r):
			quoted := strconv.QuoteRune(r)
			b.WriteString(quoted[1 : len(quoted)-1])
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

func mustEscape(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.In(r, unicode.Zl, unicode.Zp)
}
