// Package memlimit sets the Go runtime's soft memory limit from the container's cgroup limit, so
// that the garbage collector works harder before the kernel kills the process: with the default
// GOGC the heap may grow to twice what is live, and at 5,000 Stages that passes the install's
// 256 MiB limit although far less is in use (issue 21).
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Share is the part of the cgroup limit given to the Go heap; the rest is for stacks, the
// runtime and what the kernel counts beside the heap.
const share = 0.9

// CgroupLimit reads the memory limit of the cgroup the process runs in below root (normally "/"):
// cgroup v2 memory.max, else cgroup v1 memory.limit_in_bytes. ok is false when there is none.
func cgroupLimit(root string) (limit int64, ok bool, err error) {
	for _, file := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("cannot read the cgroup memory limit: %w", err)
		}
		value := strings.TrimSpace(string(data))
		if value == "max" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("cannot read the cgroup memory limit %q in %s: %w", value, file, err)
		}
		// cgroup v1 says "no limit" with a huge number (a page-rounded MaxInt64).
		if n <= 0 || n >= 1<<60 {
			return 0, false, nil
		}
		return n, true, nil
	}
	return 0, false, nil
}

// Set gives the runtime a soft memory limit of Share of the cgroup limit below root, unless
// GOMEMLIMIT is set (the operator's choice wins). It returns the limit set, 0 when none.
func Set(root string) (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, ok, err := cgroupLimit(root)
	if err != nil || !ok {
		return 0, err
	}
	soft := int64(float64(limit) * share)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// GCPercent is the controller's GOGC: the heap may grow by half of what is live before a
// collection, not by all of it. The controller's heap is mostly its caches, which stay live, so
// the default (100) kept twice the caches resident; at 5,000 Stages this costs no measurable CPU
// when idle (0.23 % of a core) and no slower first sync (make bench-scale).
const gCPercent = 50

// SetGCPercent sets GCPercent unless GOGC is set (the operator's choice wins). It returns the
// percentage set, 0 when none.
func SetGCPercent() int {
	if os.Getenv("GOGC") != "" {
		return 0
	}
	debug.SetGCPercent(gCPercent)
	return gCPercent
}
