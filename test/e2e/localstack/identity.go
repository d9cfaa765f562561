package localstack

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// ClientAs is a client that acts as user (with groups) by impersonation through the admin's
// credentials: the API server, and so the admission policies, see user as the requester. Add
// "system:masters" to groups for a user allowed everything.
func (s *Stack) ClientAs(user string, groups ...string) (client.Client, error) {
	cfg := rest.CopyConfig(s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: s.Client.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("failed to build a client impersonating %s: %w", user, err)
	}
	return c, nil
}

// AdminAuthor is the stack's admin as a Stage's spec.author: the identity the scenarios create
// Stages with (the stage-author-guard policy checks it), whose rights come from system:masters.
func AdminAuthor() *stagecoachv1.StageAuthor {
	return &stagecoachv1.StageAuthor{User: AdminUser, Groups: []string{"system:masters"}}
}

// For is the scenario as seen from a subtest t: the same namespace and logs, with assertions
// (G) that fail t. Scenario steps that depend on each other run as subtests this way.
func (sc *Scenario) For(t *testing.T) *Scenario {
	sub := *sc
	sub.T, sub.G = t, NewWithT(t)
	return &sub
}
