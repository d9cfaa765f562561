// Package subst parses the substitutions of a Stage's spec ({{ .Digest }} in a Git value, a run
// template, an HTTP check's URL, an applier field): text/template restricted to text, {{ .Name }}
// and {{ if }}/{{ else }} on comparisons of names and constants ({{ if eq .Version "v2" }}). A
// Stage's author is a tenant of a controller that serves every namespace, and full templates let
// one spend its CPU and memory without bound: {{ range 1e12 }}, a recursive {{ template }}, or
// {{ printf "%999999999d" 1 }}. What is allowed renders in time and space bounded by its length.
package subst

import (
	"bytes"
	"fmt"
	"text/template"
	"text/template/parse"
)

// Template is a parsed substitution.
type Template struct {
	tmpl *template.Template
}

// Parse parses text, refusing anything but what the package allows (trim markers and comments
// included); names names what may be used, for the error.
func Parse(name, text, names string) (*Template, error) {
	tmpl, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	if tmpl.Tree != nil {
		if bad := refused(tmpl.Tree.Root); bad != nil {
			return nil, fmt.Errorf("%q is not a substitution: only text, {{ .Name }} and {{ if eq .Name \"value\" }} … {{ else }} … {{ end }} may appear (%s)",
				bad.String(), names)
		}
	}
	return &Template{tmpl: tmpl}, nil
}

// comparisons are the functions a condition may call: builtins that neither loop nor allocate.
var comparisons = map[string]bool{"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true, "and": true, "or": true, "not": true}

// refused is the first node of list that is not allowed, nil when all are.
func refused(list *parse.ListNode) parse.Node {
	if list == nil {
		return nil
	}
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
		case *parse.ActionNode:
			if !isField(n.Pipe) {
				return n
			}
		case *parse.IfNode:
			if !isCondition(n.Pipe) {
				return n
			}
			if bad := refused(n.List); bad != nil {
				return bad
			}
			if bad := refused(n.ElseList); bad != nil {
				return bad
			}
		default:
			return n
		}
	}
	return nil
}

// isField: the pipeline prints one field of the data ({{ .Name }}).
func isField(p *parse.PipeNode) bool {
	if p == nil || len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	return isOperand(p.Cmds[0].Args[0])
}

// isCondition: a field, or one comparison of fields, constants and nested conditions.
func isCondition(p *parse.PipeNode) bool {
	if p == nil || len(p.Decl) > 0 || len(p.Cmds) != 1 {
		return false
	}
	args := p.Cmds[0].Args
	if len(args) == 1 {
		return isOperand(args[0])
	}
	fn, ok := args[0].(*parse.IdentifierNode)
	if !ok || !comparisons[fn.Ident] {
		return false
	}
	for _, a := range args[1:] {
		if sub, ok := a.(*parse.PipeNode); ok {
			if !isCondition(sub) {
				return false
			}
		} else if !isOperand(a) {
			return false
		}
	}
	return true
}

// isOperand: a field of the data (.Name) or a constant.
func isOperand(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.FieldNode:
		return len(n.Ident) == 1
	case *parse.StringNode, *parse.NumberNode, *parse.BoolNode:
		return true
	}
	return false
}

// Execute substitutes data's fields.
func (t *Template) Execute(data any) (string, error) {
	var buf bytes.Buffer
	if err := t.tmpl.Execute(&buf, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}
