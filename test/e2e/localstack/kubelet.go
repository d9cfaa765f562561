package localstack

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ExitCodeAnnotation on a Pod (for example in a Job's pod template) is the exit code RunPods gives
// its containers; without it they exit 0.
const ExitCodeAnnotation = "localstack.stagecoach.dev/exit-code"

// RunPods stands in for a node's kubelet in the scenario's namespace until the test ends (see
// Stack.RunPods).
func (sc *Scenario) RunPods() {
	sc.T.Helper()
	ctx, cancel := context.WithCancel(sc.Ctx())
	done := make(chan struct{})
	sc.T.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		sc.Stack.RunPods(ctx, sc.NS, sc.T.Logf)
	}()
}

// RunPods stands in for a node's kubelet in namespace until ctx ends: the stack runs no node, so
// each Pod that has not ended is ended at once, its containers terminated with the exit code of
// ExitCodeAnnotation, and its status written as a kubelet writes it (phase Succeeded or Failed,
// start time, each container's terminated state). What the Pods' owners do with that (the Job
// controller counting them, finishing the Job) is Kubernetes' own code. logf reports Pods it
// cannot end.
func (s *Stack) RunPods(ctx context.Context, namespace string, logf func(format string, args ...any)) {
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := s.Client.List(ctx, &pods, client.InNamespace(namespace)); err == nil {
			for i := range pods.Items {
				if err := endPod(ctx, s.Client, &pods.Items[i]); err != nil && ctx.Err() == nil {
					logf("stand-in kubelet: pod %s/%s: %v", namespace, pods.Items[i].Name, err)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// endPod writes the status of a Pod whose containers have run and exited.
func endPod(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	code := 0
	if v, ok := pod.Annotations[ExitCodeAnnotation]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		code = n
	}
	now := metav1.Now()
	phase, reason := corev1.PodSucceeded, "Completed"
	if code != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	pod.Status.Phase = phase
	pod.Status.StartTime = &now
	pod.Status.ContainerStatuses = nil
	for _, container := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: container.Name, Image: container.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: int32(code), Reason: reason, StartedAt: now, FinishedAt: now}}})
	}
	return c.Status().Update(ctx, pod)
}

// JobGrantYAML is what an operator grants Stagecoach's controller for Job run checks in namespace
// (the install grants it no rights on run kinds): create them, read them while they run, mark and
// prune them.
func JobGrantYAML(namespace string) string {
	return fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: stagecoach-run-jobs, namespace: %[1]s}
rules: [{apiGroups: [batch], resources: [jobs], verbs: [create, get, list, patch, delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: stagecoach-run-jobs, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: stagecoach-run-jobs}
subjects: [{kind: ServiceAccount, name: stagecoach-controller, namespace: stagecoach-system}]
`, namespace)
}
