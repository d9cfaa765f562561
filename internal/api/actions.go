package api

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
	"github.com/stagecoach-dev/stagecoach/internal/cli"
	"github.com/stagecoach-dev/stagecoach/internal/plan"
)

// Created is what an action answers (201).
type Created struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Message   string `json:"message"`
}

// actionFunc does one action on a Stage as the user (c impersonates them); out collects what
// the CLI function says it did.
type actionFunc func(r *http.Request, c client.Client, stage *stagecoachv1.Stage, out *bytes.Buffer) (*Created, error)

// action checks who may act on which Stage, then acts as the user: anonymous callers only read,
// the Application Argo CD authorized must belong to the Stage's pipeline, and the API server
// decides the rest (RBAC, admission policies) for the impersonated user.
func (s *Server) action(do actionFunc) handler {
	return func(w http.ResponseWriter, r *http.Request, who Viewer) error {
		if who.ReadOnly {
			return &Error{Code: http.StatusForbidden, Reason: "Forbidden",
				Message: "anonymous users may only read: log in to Argo CD to act on Stages"}
		}
		stage, err := s.stageFor(r)
		if apierrors.IsNotFound(err) {
			return &Error{Code: http.StatusNotFound, Reason: "NotFound",
				Message: fmt.Sprintf("Stage %s/%s not found", r.PathValue("namespace"), r.PathValue("name"))}
		} else if err != nil {
			return internal(fmt.Errorf("failed to read Stage %s/%s: %w", r.PathValue("namespace"), r.PathValue("name"), err))
		}
		var list stagecoachv1.StageList
		if err := s.opts.Reader.List(r.Context(), &list); err != nil {
			return internal(fmt.Errorf("failed to list Stages: %w", err))
		}
		var pipeline []*stagecoachv1.Stage
		for i := range list.Items {
			if list.Items[i].Spec.Service == stage.Spec.Service {
				pipeline = append(pipeline, &list.Items[i])
			}
		}
		if err := checkApplication(r, stage.Spec.Service, pipeline); err != nil {
			return err
		}
		c, err := s.clientAs(who)
		if err != nil {
			return internal(err)
		}
		var out bytes.Buffer
		created, err := do(r, c, stage, &out)
		if err != nil {
			return err
		}
		if created.Message == "" {
			created.Message = strings.TrimSpace(out.String())
		}
		s.opts.Log.Info("API action", "user", who.User, "kind", created.Kind, "namespace", created.Namespace, "name", created.Name,
			"path", r.URL.Path)
		writeJSON(w, http.StatusCreated, created)
		return nil
	}
}

// clientAs returns a client that acts as the user, in their groups.
func (s *Server) clientAs(who Viewer) (client.Client, error) {
	cfg := rest.CopyConfig(s.opts.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: who.User, Groups: who.Groups}
	c, err := client.New(cfg, client.Options{Scheme: s.opts.Scheme, Mapper: s.opts.Mapper})
	if err != nil {
		return nil, fmt.Errorf("failed to build a client acting as %s: %w", who.User, err)
	}
	return c, nil
}

// versionRequest is the body of promote and rollback: a version by tag or digest, and why.
type versionRequest struct {
	Version string `json:"version"`
	Digest  string `json:"digest"`
	Reason  string `json:"reason"`
}

func (s *Server) promote(r *http.Request, c client.Client, stage *stagecoachv1.Stage, out *bytes.Buffer) (*Created, error) {
	var body versionRequest
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	p, err := cli.Promote(r.Context(), c, cli.PromoteOptions{Namespace: stage.Namespace, Stage: stage.Name,
		Version: body.Version, Digest: body.Digest, Reason: reasonOr(body.Reason, "promote", r)}, out)
	if err != nil {
		return nil, err
	}
	return &Created{Kind: "Promotion", Namespace: p.Namespace, Name: p.Name}, nil
}

func (s *Server) rollback(r *http.Request, c client.Client, stage *stagecoachv1.Stage, out *bytes.Buffer) (*Created, error) {
	var body versionRequest
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	p, err := cli.Rollback(r.Context(), c, cli.RollbackOptions{Namespace: stage.Namespace, Stage: stage.Name,
		Version: body.Version, Digest: body.Digest, Reason: reasonOr(body.Reason, "rollback", r)}, out)
	if err != nil {
		return nil, err
	}
	return &Created{Kind: "Promotion", Namespace: p.Namespace, Name: p.Name}, nil
}

func (s *Server) approve(r *http.Request, c client.Client, stage *stagecoachv1.Stage, out *bytes.Buffer) (*Created, error) {
	var body struct {
		Digest  string `json:"digest"`
		Comment string `json:"comment"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	a, err := cli.Approve(r.Context(), c, cli.ApproveOptions{Namespace: stage.Namespace, Stage: stage.Name,
		Digest: body.Digest, Comment: body.Comment}, out)
	if err != nil {
		if policy := stage.Spec.Promotion; !s.opts.TrustGroupsHeader && policy != nil && policy.Approvals != nil && len(policy.Approvals.Groups) > 0 {
			// Say why the groups the person has in Argo CD did not count, and where an approval
			// that counts can be given.
			return nil, fmt.Errorf("%w. The Stagecoach API acts as you without your Argo CD groups: this controller does not take "+
				"Argocd-User-Groups (--api-trust-argocd-groups is off, as it must be while Argo CD has local accounts or anonymous access, "+
				"whose requests carry a group header of their own). Approve as yourself against the cluster "+
				"(stagecoach approve %s -n %s), where your Kubernetes groups count, or ask an administrator to bind your user name to a role that may approve",
				err, stage.Name, stage.Namespace)
		}
		return nil, err
	}
	return &Created{Kind: "Approval", Namespace: a.Namespace, Name: a.Name}, nil
}

// freeze creates a Freeze in the Stage's namespace that selects the Stage by its labels (or by
// the selector the body names). A Freeze selects by label only, so a Stage without labels
// cannot be frozen alone: that is refused rather than freezing its whole namespace.
func (s *Server) freeze(r *http.Request, c client.Client, stage *stagecoachv1.Stage, out *bytes.Buffer) (*Created, error) {
	var body struct {
		Reason   string  `json:"reason"`
		Until    string  `json:"until"`
		Selector *string `json:"selector"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	opts := cli.FreezeOptions{Namespace: stage.Namespace, Reason: body.Reason}
	if body.Until != "" {
		until, err := parseUntil(body.Until, s.opts.Clock.Now())
		if err != nil {
			return nil, err
		}
		opts.Until = until
	}
	if body.Selector != nil {
		opts.Selector = *body.Selector
	} else {
		if len(stage.Labels) == 0 {
			return nil, &Error{Code: http.StatusUnprocessableEntity, Reason: "Invalid",
				Message: fmt.Sprintf("Stage %s/%s has no labels, and a Freeze selects Stages by label: label the Stage, or name a selector (\"\" freezes every Stage of namespace %s)",
					stage.Namespace, stage.Name, stage.Namespace)}
		}
		opts.Selector = labels.SelectorFromSet(stage.Labels).String()
	}
	f, err := cli.Freeze(r.Context(), c, opts, out)
	if err != nil {
		return nil, err
	}
	return &Created{Kind: "Freeze", Namespace: f.Namespace, Name: f.Name}, nil
}

// unfreeze deletes the Freezes of the Stage's namespace that hold it (or the one the body
// names); when none does, the Stage was frozen by a foreign write or a Freeze Promotion, and an
// Unfreeze Promotion accepts that. Cluster-wide Freezes are left to whoever made them.
func (s *Server) unfreeze(r *http.Request, c client.Client, stage *stagecoachv1.Stage, out *bytes.Buffer) (*Created, error) {
	var body struct {
		Freeze string `json:"freeze"`
		Reason string `json:"reason"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	names := []string{}
	if body.Freeze != "" {
		names = append(names, body.Freeze)
	} else {
		var list stagecoachv1.FreezeList
		if err := s.opts.Reader.List(r.Context(), &list, client.InNamespace(stage.Namespace)); err != nil {
			return nil, internal(fmt.Errorf("failed to list the Freezes of namespace %s: %w", stage.Namespace, err))
		}
		for _, f := range plan.ActiveFreezes(stage, nil, list.Items, "", s.opts.Clock.Now()) {
			names = append(names, f.Name)
		}
		sort.Strings(names)
	}
	if len(names) == 0 {
		p, err := cli.UnfreezeStage(r.Context(), c, stage.Namespace, stage.Name, reasonOr(body.Reason, "unfreeze", r), out)
		if err != nil {
			return nil, err
		}
		return &Created{Kind: "Promotion", Namespace: p.Namespace, Name: p.Name}, nil
	}
	for _, name := range names {
		if err := cli.Unfreeze(r.Context(), c, stage.Namespace, name, out); err != nil {
			return nil, err
		}
	}
	return &Created{Kind: "Freeze", Namespace: stage.Namespace, Name: strings.Join(names, ",")}, nil
}

// reasonOr is the caller's reason, or one that says the action came from the Argo CD UI (the
// CLI functions' default names the CLI).
func reasonOr(reason, action string, r *http.Request) string {
	if strings.TrimSpace(reason) != "" {
		return reason
	}
	return fmt.Sprintf("%s by %s from the Argo CD UI", action, strings.TrimSpace(r.Header.Get(headerUsername)))
}

// parseUntil reads an RFC 3339 time or a duration from now (as the CLI's --until does).
func parseUntil(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, &Error{Code: http.StatusUnprocessableEntity, Reason: "Invalid", Message: fmt.Sprintf("until %q must be in the future", s)}
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, &Error{Code: http.StatusUnprocessableEntity, Reason: "Invalid",
			Message: fmt.Sprintf("until %q is neither a time such as 2026-12-24T18:00:00Z nor a duration such as 4h", s)}
	}
	return t, nil
}
