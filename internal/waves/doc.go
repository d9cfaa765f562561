// Package waves decides a fleet rollout over an ApplicationSet's Applications: which wave each
// target belongs to, which targets to promote now, each wave's status, and when the rollout is
// complete, halted or refused. It is pure (no Kubernetes client): the reconciler reads the
// Applications and cluster Secrets, turns them into Targets (see ResolveTargets), asks Schedule,
// then acts on the Decision and writes its statuses.
//
// The scheduler never remembers anything itself: every call recomputes the plan from the
// targets' phases, so a reconcile that is lost or repeated cannot make it skip or repeat a step.
// Only startedAt and finishedAt come from the previous status, so that they are written once.
package waves
