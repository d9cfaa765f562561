package check

import (
	"fmt"
	"strings"
)

// pathSpecial are the characters that make a gjson path more than a walk down keys: queries
// (#(...)), array counts and fan-outs (#), modifiers (@reverse, @this), literals (!true),
// multipaths ([a,b], {a,b}), pipes (|) and wildcards (* ?). A check's body match takes plain paths
// only: with a query or a modifier a Stage author could test a secret in another service's answer
// a character at a time (prefix matches, lengths), telling "missing" from "different" in the
// check's message, where a plain path only ever compares a whole value.
const pathSpecial = `*?#@|![]{}()`

// bodyPathHelp says what a body path may be, for messages.
const bodyPathHelp = "use a plain path: keys separated by dots, array elements by number " +
	`(for example checks.0.status), with a backslash before a literal . or any of ` + pathSpecial

// plainPath returns nil when path is a plain gjson path (non-empty keys separated by dots, where
// a backslash makes the next character literal), else what is wrong with it.
func plainPath(path string) error {
	if path == "" {
		return fmt.Errorf("it is empty")
	}
	keyStart := true // at the start of a key: the path's, or after a dot
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '\\':
			if i == len(path)-1 {
				return fmt.Errorf("it ends with a backslash that escapes nothing")
			}
			i++ // the next byte is literal; a multi-byte rune's next bytes are never special
			keyStart = false
		case c == '.':
			if keyStart {
				return fmt.Errorf("it has an empty key at position %d", i+1)
			}
			keyStart = true
		case strings.IndexByte(pathSpecial, c) >= 0:
			return fmt.Errorf("it has %s at position %d", describeSpecial(c, path[i:]), i+1)
		default:
			keyStart = false
		}
	}
	if keyStart {
		return fmt.Errorf("it ends with a dot")
	}
	return nil
}

// describeSpecial names the gjson feature a special character starts, for messages.
func describeSpecial(c byte, rest string) string {
	switch {
	case c == '#' && len(rest) > 1 && (rest[1] == '(' || rest[1] == '['):
		return "a query (#(...))"
	case c == '#':
		return "an array count or fan-out (#)"
	case c == '@':
		return "a modifier (@)"
	case c == '|':
		return "a pipe (|)"
	case c == '!':
		return "a literal (!)"
	case c == '*' || c == '?':
		return fmt.Sprintf("a wildcard (%c)", c)
	case c == '[' || c == '{':
		return fmt.Sprintf("a multipath (%c)", c)
	default:
		return fmt.Sprintf("%q", c)
	}
}
