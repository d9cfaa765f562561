package check

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/tidwall/gjson"
)

func TestPlainPath(t *testing.T) {
	tests := []struct {
		path string
		// want is part of the error; "" when the path is plain.
		want string
	}{
		{path: "status"},
		{path: "checks.0.status"},
		{path: "build.commit"},
		{path: `app\.kubernetes\.io/name`},
		{path: `a\*b`},
		{path: `\#`},
		{path: `\@this`},
		{path: `x\|y`},
		{path: `\!true`},
		{path: `\[a\]`},
		{path: "name-with_üñíçødé:and spaces"},
		{path: `back\\slash`},
		{path: "", want: "it is empty"},
		{path: `checks.#(name=="db").status`, want: "a query (#(...)) at position 8"},
		{path: `#(token%"s*")`, want: "a query (#(...)) at position 1"},
		{path: `checks.#[name=="db"]`, want: "a query (#(...)) at position 8"},
		{path: "checks.#", want: "an array count or fan-out (#) at position 8"},
		{path: "checks.#.name", want: "an array count or fan-out (#)"},
		{path: "@reverse", want: "a modifier (@) at position 1"},
		{path: "@this", want: "a modifier (@)"},
		{path: "token.@reverse", want: "a modifier (@) at position 7"},
		{path: `@dig:token`, want: "a modifier (@)"},
		{path: "status|@this", want: "a pipe (|) at position 7"},
		{path: "!true", want: "a literal (!)"},
		{path: "[status,token]", want: "a multipath ([) at position 1"},
		{path: "{status,token}", want: "a multipath ({)"},
		{path: "status.[a,b]", want: "a multipath ([)"},
		{path: "tok*", want: "a wildcard (*) at position 4"},
		{path: "t?ken", want: "a wildcard (?) at position 2"},
		{path: "a(b", want: `'(' at position 2`},
		{path: "..0", want: "an empty key at position 1"},
		{path: ".status", want: "an empty key at position 1"},
		{path: "a..b", want: "an empty key at position 3"},
		{path: "status.", want: "it ends with a dot"},
		{path: `status\`, want: "a backslash that escapes nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			g := NewWithT(t)
			err := plainPath(tt.path)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

// fuzzDocs are what FuzzPlainPath reads: keys that would mean something to gjson unescaped.
var fuzzDocs = []string{
	`{"status":"ok","checks":[{"name":"db","status":"up"},{"name":"cache","status":"down"}],` +
		`"a.b":{"c":1},"a*b":"star","ab":"plain","#":"hash","@this":"at","@reverse":"rev","x|y":"pipe",` +
		`"!true":"bang","[a]":"bracket","{a}":"brace","[a":"open bracket","{a":"open brace","(x)":"paren","":"empty","n":null,"t":true,` +
		`"\\":"backslash","é":{"ü":2},"0":"zero","token":"s3cret"}`,
	`[{"token":"s3cret"},[1,2,[3]],"x",{"0":"key zero"}]`,
}

// walk is what a plain path means: keys separated by unescaped dots, looked up one after the
// other; an array takes a key of digits only as an index (gjson does not unescape there).
func walk(doc any, path string) (any, bool) {
	var raw, key strings.Builder
	var keys, raws []string
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c == '\\' && i+1 < len(path):
			raw.WriteByte(c)
			raw.WriteByte(path[i+1])
			key.WriteByte(path[i+1])
			i++
		case c == '.':
			keys, raws = append(keys, key.String()), append(raws, raw.String())
			key.Reset()
			raw.Reset()
		default:
			raw.WriteByte(c)
			key.WriteByte(c)
		}
	}
	keys, raws = append(keys, key.String()), append(raws, raw.String())
	cur := doc
	for i, k := range keys {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[k]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			// gjson reads at most 20 digits as an index.
			if strings.Trim(raws[i], "0123456789") != "" || len(raws[i]) > 20 {
				return nil, false
			}
			n, err := strconv.ParseUint(raws[i], 10, 64)
			if err != nil || n >= uint64(len(v)) {
				return nil, false
			}
			cur = v[n]
		default:
			return nil, false
		}
	}
	return cur, true
}

// FuzzPlainPath: a path plainPath accepts reads, through gjson, exactly what a walk down its keys
// reads: no query, modifier, multipath, pipe or wildcard gets through.
func FuzzPlainPath(f *testing.F) {
	for _, p := range []string{"status", "checks.1.status", `a\.b.c`, `a\*b`, "a*b", `\#`, "#", `\@this`, "@this",
		`x\|y`, "x|y", `\!true`, `\[a\]`, "[a]", `\{a\}`, `\(x\)`, "(x)", `é.ü`, "0", "1.2.0", `3.\0`, `..#`, "a..b",
		`checks.#(name=="db").status`, "token.@reverse", `\\`, "t?ken", "n", "t", strings.Repeat("0", 21),
		"!true", "[a", "{a", "[a]", "{a}"} {
		f.Add(p)
	}
	docs := make([]any, len(fuzzDocs))
	for i, d := range fuzzDocs {
		if err := json.Unmarshal([]byte(d), &docs[i]); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, path string) {
		if plainPath(path) != nil {
			return
		}
		for i, d := range fuzzDocs {
			want, wantOK := walk(docs[i], path)
			got := gjson.Get(d, path)
			if got.Exists() != wantOK {
				t.Fatalf("path %q on document %d: gjson finds it: %v, a walk down its keys: %v", path, i, got.Exists(), wantOK)
			}
			if !wantOK {
				continue
			}
			var gotValue any
			if err := json.Unmarshal([]byte(got.Raw), &gotValue); err != nil {
				t.Fatalf("path %q on document %d: gjson read %q: %v", path, i, got.Raw, err)
			}
			if !reflect.DeepEqual(gotValue, want) {
				t.Fatalf("path %q on document %d: gjson reads %s, a walk down its keys %v", path, i, got.Raw, want)
			}
		}
	})
}
