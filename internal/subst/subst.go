// Package subst parses the substitutions of a Stage's spec ({{ .Digest }} in a Git value, a run
// template, an HTTP check's URL, an applier field): text/template restricted to text and
// {{ .Name }} actions. A Stage's author is a tenant of a controller that serves every namespace,
// and full templates would let one spend its CPU and memory without bound ({{ range 1e12 }}).
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

// Parse parses text, refusing anything but text and {{ .Name }} actions (trim markers allowed);
// names names what may be used, for the error.
func Parse(name, text, names string) (*Template, error) {
	tmpl, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	if tmpl.Tree != nil {
		for _, n := range tmpl.Tree.Root.Nodes {
			if !allowed(n) {
				return nil, fmt.Errorf("%q is not a substitution: only text and {{ .Name }} may appear (%s)", n.String(), names)
			}
		}
	}
	return &Template{tmpl: tmpl}, nil
}

// allowed is a text node, or an action that prints one field of the data.
func allowed(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.TextNode:
		return true
	case *parse.ActionNode:
		p := n.Pipe
		if p == nil || len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
			return false
		}
		f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
		return ok && len(f.Ident) == 1
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
