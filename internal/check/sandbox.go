package check

import (
	"context"
	"fmt"
	"runtime"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultPluginDenyRead holds the mounted service-account credentials: a plugin runs as the
// controller's user, and the token would give it the controller's rights in the cluster.
var defaultPluginDenyRead = []string{"/var/run/secrets", "/run/secrets"}

// PluginSandbox says whether plugins run unable to read PluginDenyRead: nil when they do,
// else why not (a kernel without Landlock), for the controller to report.
func (r *Runner) PluginSandbox() error {
	r.sandboxProbe.Do(func() { r.sandboxErr = sandboxSupported() })
	return r.sandboxErr
}

// sandboxed runs start, which starts a plugin process, so that the process cannot read
// PluginDenyRead. Landlock and no_new_privs hold for one thread and the processes it forks:
// start runs on a thread of its own, restricted first and never given back to the scheduler,
// so it ends with its goroutine and no other goroutine of the controller runs restricted.
func (r *Runner) sandboxed(ctx context.Context, start func() error) error {
	if err := r.PluginSandbox(); err != nil {
		if r.sandboxLogged.CompareAndSwap(false, true) {
			log.FromContext(ctx).Info("check plugins run without a read sandbox and can read the service-account token", "reason", err.Error())
		}
		return start()
	}
	deny := r.PluginDenyRead
	if deny == nil {
		deny = defaultPluginDenyRead
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the restricted thread exits with this goroutine
		if err := restrictReads(deny); err != nil {
			done <- fmt.Errorf("sandboxing it so it cannot read %v: %w", deny, err)
			return
		}
		done <- start()
	}()
	return <-done
}
