package verify

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Identity is a keyless signing identity: regular expressions the OIDC issuer and the subject
// (the certificate's subject alternative name) of a Fulcio certificate must match, as Flux's
// OCIRepository spells them (verify.matchOIDCIdentity). Each must match the whole value, as if
// written between ^ and $: "https://github.com/org/app" does not match a subject that only
// contains it.
type Identity struct {
	Issuer  string
	Subject string
}

// String is the identity as messages show it.
func (id Identity) String() string {
	return fmt.Sprintf("{issuer %q, subject %q}", id.Issuer, id.Subject)
}

// identityMatcher is a compiled Identity.
type identityMatcher struct {
	Identity
	issuer  *regexp.Regexp
	subject *regexp.Regexp
}

// anchored compiles expr so that it must match the whole value. An unanchored expression would
// let "https://github.com/org/app" trust "https://github.com/evil/x?https://github.com/org/app".
func anchored(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// compileIdentity checks and compiles an identity; the error names the field.
func compileIdentity(id Identity) (identityMatcher, error) {
	m := identityMatcher{Identity: id}
	for _, f := range []struct {
		field, expr string
		re          **regexp.Regexp
	}{{"issuer", id.Issuer, &m.issuer}, {"subject", id.Subject, &m.subject}} {
		if f.expr == "" {
			return m, fmt.Errorf("%s is empty: give a regular expression (such as ^https://token.actions.githubusercontent.com$)", f.field)
		}
		// Check the expression alone first: wrapped, "a)(b" would compile and mean something else.
		if _, err := regexp.Compile(f.expr); err != nil {
			return m, fmt.Errorf("%s %q is not a regular expression: %w", f.field, f.expr, err)
		}
		re, err := anchored(f.expr)
		if err != nil {
			return m, fmt.Errorf("%s %q is not a regular expression: %w", f.field, f.expr, err)
		}
		*f.re = re
	}
	return m, nil
}

// matches reports whether a certificate's issuer and subject match the identity.
func (m identityMatcher) matches(issuer, subject string) bool {
	return m.issuer.MatchString(issuer) && m.subject.MatchString(subject)
}

// identitySet is the keyless identities a Verifier trusts.
type identitySet []identityMatcher

// compiledSets keeps the identity sets compiled lately: the controller builds a Verifier per
// reconcile, and compiling the expressions each time would cost more than the cached verdict
// it then returns. Compiled expressions are safe for concurrent use.
var compiledSets = struct {
	sync.Mutex
	byKey map[string]identitySet
}{byKey: map[string]identitySet{}}

// maxCompiledSets bounds compiledSets (one set per Stage's verify, at most).
const maxCompiledSets = 1024

// compileIdentities compiles every identity; the error names the bad one (1-based).
func compileIdentities(ids []Identity) (identitySet, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id.Issuer + "\x00" + id.Subject + "\x01")
	}
	key := b.String()
	compiledSets.Lock()
	set, ok := compiledSets.byKey[key]
	compiledSets.Unlock()
	if ok {
		return set, nil
	}
	set = make(identitySet, 0, len(ids))
	for i, id := range ids {
		m, err := compileIdentity(id)
		if err != nil {
			return nil, fmt.Errorf("identity %d: %w", i+1, err)
		}
		set = append(set, m)
	}
	compiledSets.Lock()
	defer compiledSets.Unlock()
	if len(compiledSets.byKey) >= maxCompiledSets {
		clear(compiledSets.byKey) // compiled again when next used
	}
	compiledSets.byKey[key] = set
	return set, nil
}

// match returns the first identity the issuer and subject match.
func (s identitySet) match(issuer, subject string) (identityMatcher, bool) {
	for _, m := range s {
		if m.matches(issuer, subject) {
			return m, true
		}
	}
	return identityMatcher{}, false
}

// key is a canonical form of the set for the verdict cache: the same identities in any order
// give the same key. NUL cannot occur in a Kubernetes string field, so fields cannot run together.
func (s identitySet) key() string {
	parts := make([]string, len(s))
	for i, m := range s {
		parts[i] = m.Issuer + "\x00" + m.Subject
	}
	slices.Sort(parts)
	return strings.Join(parts, "\x01")
}

// String lists the identities for messages.
func (s identitySet) String() string {
	parts := make([]string, len(s))
	for i, m := range s {
		parts[i] = m.Identity.String()
	}
	return strings.Join(parts, ", ")
}
