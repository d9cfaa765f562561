// Package attest decides whether a version carries the in-toto attestations a Stage requires
// (verify.attestations): the statements internal/verify found and verified for a digest are
// judged here by each requirement's CEL condition, and a promotion attestation is built.
package attest

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// MaxConditionCost bounds one evaluation of a condition (CEL's cost units: roughly, values
// visited): a condition that loops over a large SBOM's packages stops with an error rather than
// hold the reconcile.
const MaxConditionCost = 1_000_000

// predicateTypes are the short names cosign's attest --type accepts, and the URIs they stand for.
var predicateTypes = map[string]string{
	"custom":           "https://cosign.sigstore.dev/attestation/v1",
	"slsaprovenance":   "https://slsa.dev/provenance/v0.2",
	"slsaprovenance02": "https://slsa.dev/provenance/v0.2",
	"slsaprovenance1":  "https://slsa.dev/provenance/v1",
	"spdx":             "https://spdx.dev/Document",
	"spdxjson":         "https://spdx.dev/Document",
	"cyclonedx":        "https://cyclonedx.org/bom",
	"link":             "https://in-toto.io/attestation/link/v0.3",
	"vuln":             "https://cosign.sigstore.dev/attestation/vuln/v1",
	"openvex":          "https://openvex.dev/ns",
}

// PredicateTypeURI is the predicate type a requirement names: a URI as it is, a cosign short
// name as the URI it stands for.
func PredicateTypeURI(t string) string {
	if uri, ok := predicateTypes[strings.ToLower(t)]; ok {
		return uri
	}
	return t
}

// Condition is a compiled CEL condition over an in-toto statement.
type Condition struct {
	source string
	prg    cel.Program
}

// env is the CEL environment conditions compile in: the statement's predicate (JSON), its
// predicateType and its subject list, with CEL's string extensions.
func env() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("predicate", cel.DynType),
		cel.Variable("predicateType", cel.StringType),
		cel.Variable("subject", cel.ListType(cel.DynType)),
		ext.Strings(),
	)
}

// Compile checks a condition compiles to a boolean; the error says where it does not.
func Compile(source string) (*Condition, error) {
	e, err := env()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(source)
	if iss.Err() != nil {
		return nil, fmt.Errorf("condition %q does not compile: %w", source, iss.Err())
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("condition %q is a %s, not a boolean", source, t)
	}
	prg, err := e.Program(ast, cel.CostLimit(MaxConditionCost), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", source, err)
	}
	return &Condition{source: source, prg: prg}, nil
}

// String is the condition as written.
func (c *Condition) String() string { return c.source }

// Holds evaluates the condition over a statement's JSON (read with the in-toto types). An error
// (a field the predicate lacks, a non-boolean result, the cost limit) is not a pass.
func (c *Condition) Holds(ctx context.Context, statement []byte) (bool, error) {
	st := &intoto.Statement{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(statement, st); err != nil {
		return false, fmt.Errorf("statement is not an in-toto statement: %w", err)
	}
	subject := make([]any, 0, len(st.GetSubject()))
	for _, rd := range st.GetSubject() {
		digest := make(map[string]any, len(rd.GetDigest()))
		for alg, hex := range rd.GetDigest() {
			digest[alg] = hex
		}
		subject = append(subject, map[string]any{"name": rd.GetName(), "uri": rd.GetUri(), "digest": digest,
			"annotations": rd.GetAnnotations().AsMap()})
	}
	var predicate any = map[string]any{}
	if p := st.GetPredicate(); p != nil {
		predicate = p.AsMap()
	}
	out, _, err := c.prg.ContextEval(ctx, map[string]any{"predicate": predicate, "predicateType": st.GetPredicateType(), "subject": subject})
	if err != nil {
		return false, fmt.Errorf("condition %q failed to evaluate: %w", c.source, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("condition %q is not a boolean: it gave %v", c.source, out.Value())
	}
	return b, nil
}
