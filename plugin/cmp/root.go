package cmp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The boundary: Argo CD sends the plugin the whole repository and runs generate in
// <root>/<appRelPath>. Kustomize bases and Helm value files may live elsewhere in the repository,
// so the boundary is the repository root, found in this order:
//
//  1. Options.RepoRoot when set;
//  2. the app directory with ARGOCD_APP_SOURCE_PATH (spec.source.path, which is the appRelPath
//     the repo-server streams) taken off its end, when the path ends with it;
//  3. the nearest ancestor holding .git (a local checkout; the repo-server streams .git too
//     unless the tar exclusions drop it);
//  4. the app directory itself.
//
// Every path is then resolved through its symlinks and must stay inside the resolved root.

// locate returns the resolved app directory and repository root.
func locate(dir, repoRoot, sourcePath string) (appDir, root string, err error) {
	if dir, err = filepath.Abs(dir); err != nil {
		return "", "", fmt.Errorf("failed to resolve the app directory %q: %w", dir, err)
	}
	if repoRoot == "" {
		repoRoot = findRepoRoot(dir, sourcePath)
	}
	if root, err = filepath.Abs(repoRoot); err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return "", "", fmt.Errorf("failed to resolve the repository root %s: %w", repoRoot, err)
	}
	if appDir, err = filepath.EvalSymlinks(dir); err != nil {
		return "", "", fmt.Errorf("failed to resolve the app directory %s: %w", dir, err)
	}
	if !within(appDir, root) {
		return "", "", fmt.Errorf("app directory %s resolves to %s, outside the repository root %s: the stagecoach plugin renders only files inside the repository, replace the symlink with the files", dir, appDir, root)
	}
	return appDir, root, nil
}

func findRepoRoot(dir, sourcePath string) string {
	if sp := filepath.Clean(filepath.FromSlash(sourcePath)); sourcePath != "" && sp != "." && !filepath.IsAbs(sp) && !strings.HasPrefix(sp, "..") {
		if trimmed, ok := strings.CutSuffix(dir, string(filepath.Separator)+sp); ok {
			return trimmed
		}
	}
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// within reports whether path is root or below it; both must be clean and absolute.
func within(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// relTo names path relative to root for messages (root-relative paths read like the repository).
func relTo(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return path
}

// resolveInside resolves path's symlinks and refuses a result outside root. A path that does not
// exist is returned as is, for the caller to report.
func resolveInside(path, root string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to resolve %s: %w", relTo(root, path), err)
	}
	if !within(real, root) {
		if abs, _ := filepath.Abs(path); abs == real {
			return "", fmt.Errorf("%s is outside the repository root %s: the stagecoach plugin reads only files inside the repository", path, root)
		}
		return "", fmt.Errorf("%s resolves to %s, outside the repository root %s: the stagecoach plugin reads only files inside the repository, replace the symlink with the file", relTo(root, path), real, root)
	}
	return real, nil
}

// checkSymlinks walks dir (following symlinked directories that stay inside root) and refuses any
// symlink that leads outside root, before a renderer that follows symlinks reads the tree.
func checkSymlinks(dir, root string) error {
	seen := map[string]bool{}
	var walk func(string) error
	walk = func(d string) error {
		if seen[d] {
			return nil
		}
		seen[d] = true
		return filepath.WalkDir(d, func(path string, entry fs.DirEntry, err error) error {
			if err != nil {
				return fmt.Errorf("failed to read %s: %w", relTo(root, path), err)
			}
			if entry.IsDir() && entry.Name() == ".git" {
				return filepath.SkipDir
			}
			if entry.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			real, err := resolveInside(path, root)
			if err != nil {
				return err
			}
			if info, err := os.Stat(real); err == nil && info.IsDir() {
				return walk(real)
			}
			return nil
		})
	}
	return walk(dir)
}
