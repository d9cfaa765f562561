// Command example is a Stagecoach check plugin to copy from. It refuses versions whose digest is
// on a deny list, unless told to allow everything.
//
// Config (spec.plugin.config):
//
//	allow: "true"             pass every version (an escape hatch while the deny list is wrong)
//	deny:  "sha256:…,sha256:…" comma-separated digests that fail the check
//
// Any other key is refused, so that a typo does not silently let a version through.
//
// Build it with `go build -o <plugin-dir>/example ./plugin/check/example`, then pin it in a Stage
// by its `sha256sum`.
package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/stagecoach-dev/stagecoach/plugin/check"
)

type denyList struct{}

func (denyList) Check(_ context.Context, req check.Request) (check.Result, error) {
	for key := range req.Config {
		if key != "allow" && key != "deny" {
			return check.Result{}, fmt.Errorf("unknown config key %q: the example plugin knows allow and deny", key)
		}
	}
	if allow, ok := req.Config["allow"]; ok {
		switch allow {
		case "true":
			return check.Result{Passed: true, Message: "allow is true: every version passes"}, nil
		case "false":
		default:
			return check.Result{}, fmt.Errorf("config allow is %q: set it to true or false", allow)
		}
	}
	denied := strings.FieldsFunc(req.Config["deny"], func(r rune) bool { return r == ',' || r == ' ' })
	if slices.Contains(denied, req.Digest) {
		return check.Result{Message: fmt.Sprintf("%s (%s) of %s is on the deny list", req.Version, req.Digest, req.Service)}, nil
	}
	return check.Result{Passed: true, Message: fmt.Sprintf("%s (%s) is not on the deny list", req.Version, req.Digest)}, nil
}

func main() {
	check.Serve(denyList{})
}
