package check

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readAccess is all the ruleset handles: opening files for reading and listing directories.
// Executing, writing and everything else stay as they are.
const readAccess = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR

// landlockABI asks the kernel for its Landlock version; a variable so tests can play a kernel
// without it.
var landlockABI = func() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

func sandboxSupported() error {
	abi, err := landlockABI()
	switch {
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("the kernel has no Landlock (%v); enable it (lsm=landlock) to sandbox check plugins", err)
	case err != nil:
		return fmt.Errorf("the kernel refused Landlock (%v); allow the landlock_* syscalls (seccomp) to sandbox check plugins", err)
	case abi < 1:
		return fmt.Errorf("the kernel reports Landlock ABI %d, not a usable one", abi)
	}
	return nil
}

// restrictReads makes the calling thread, and what it forks from now on, unable to read beneath
// deny. The caller must have locked its goroutine to the thread for good.
func restrictReads(deny []string) error {
	// landlock_restrict_self needs it without CAP_SYS_ADMIN; it also keeps a setuid plugin
	// from gaining rights the controller does not have.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	allowed, err := readablePaths(deny)
	if err != nil {
		return err
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: readAccess}
	// Only handled_access_fs is passed (8 bytes), a size every Landlock ABI accepts.
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr.Handled_access_fs), 0)
	if errno != 0 {
		return fmt.Errorf("creating the Landlock ruleset: %w", errno)
	}
	ruleset := int(fd)
	defer func() { _ = unix.Close(ruleset) }()
	for _, p := range allowed {
		if err := allowRead(ruleset, p); err != nil {
			return err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return fmt.Errorf("enforcing the Landlock ruleset: %w", errno)
	}
	return nil
}

func allowRead(ruleset int, path string) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone since it was listed: nothing to allow
		}
		return fmt.Errorf("opening %s for a Landlock rule: %w", path, err)
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	access := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE) // READ_DIR is refused on a non-directory
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		access = readAccess
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("allowing reads beneath %s: %w", path, errno)
	}
	return nil
}

// readablePaths lists what to allow reads beneath: every entry of "/", except that a directory
// holding a denied path is split into its own entries, down to the denied ones, which are left
// out. Paths are resolved, so a denied /var/run/secrets with /var/run a link to /run leaves out
// /run/secrets, and a link into a denied directory allows nothing. The list is taken as each
// plugin starts: what appears later directly in a split directory ("/", /run, /var) is not
// readable to that plugin, which plugins do not need: they keep to their own files and their
// TMPDIR, a directory made for each before its list is taken.
func readablePaths(deny []string) ([]string, error) {
	var denied []string
	for _, d := range deny {
		real, err := resolve(d)
		if err != nil {
			return nil, err
		}
		denied = append(denied, real)
	}
	within := func(p, dir string) bool {
		return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
	}
	isDenied := func(p string) bool {
		for _, d := range denied {
			if within(p, d) {
				return true
			}
		}
		return false
	}
	holdsDenied := func(p string) bool {
		for _, d := range denied {
			if within(d, p) {
				return true
			}
		}
		return false
	}

	var allowed []string
	seen := map[string]bool{}
	var split func(dir string) error
	split = func(dir string) error {
		if seen[dir] {
			return nil
		}
		seen[dir] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			// Failing closed: allowing dir whole would allow what it holds.
			return fmt.Errorf("listing %s to leave the denied paths out: %w", dir, err)
		}
		for _, e := range entries {
			p, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name()))
			if err != nil {
				continue // a dangling link or gone: nothing to read there
			}
			switch {
			case isDenied(p):
			case holdsDenied(p):
				if err := split(p); err != nil {
					return err
				}
			case !seen[p]:
				seen[p] = true
				allowed = append(allowed, p)
			}
		}
		return nil
	}
	return allowed, split("/")
}

// resolve returns path with its symbolic links resolved, as far as it exists: a missing denied
// path stays denied should it appear later.
func resolve(path string) (string, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(path)
	switch {
	case err == nil:
		return real, nil
	case !errors.Is(err, os.ErrNotExist) || path == "/":
		return "", fmt.Errorf("resolving the denied path %s: %w", path, err)
	}
	parent, err := resolve(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	return filepath.Join(parent, filepath.Base(path)), nil
}
