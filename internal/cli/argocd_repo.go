package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// cmpRepo is the repository copy that Argo CD gives the plugin, opened as
// an os.Root: every file the plugin reads, or names to a tool, is found
// through it, so that no path or symbolic link an Application wrote leads
// out of it.
type cmpRepo struct {
	dir  string   // the repository's folder, symbolic links resolved
	src  string   // the source folder, relative to dir ("" for dir itself)
	root *os.Root // dir
	// sourcePath is how messages name the source folder:
	// ARGOCD_APP_SOURCE_PATH as the Application wrote it, else "the source
	// folder".
	sourcePath string
}

// cmpMaxFileSize bounds each file an Application names: Helm reads a
// values file whole into memory, in the sidecar every Application shares.
const cmpMaxFileSize = 64 << 20

// cmpMaxLinks bounds the symbolic links followed in one path, as Linux
// does (MAXSYMLINKS): more is a loop.
const cmpMaxLinks = 40

// Errors of resolveInRepo besides the file system's own.
var (
	errOutside = errors.New("outside the repository")
	errLoop    = errors.New("too many levels of symbolic links")
)

// openCmpRepo opens the repository that the source folder cwd (the folder
// Argo CD runs the plugin in) is the folder sourcePath of
// (ARGOCD_APP_SOURCE_PATH). Argo CD passes the path as the Application
// wrote it ("./web", "web/", "a//b") and runs the plugin in the folder it
// names, cleaned: the path is cleaned the same way, and cwd, links
// resolved, must end with it. Otherwise a ".." or a link inside the path
// would make a folder above the repository its root, and the files beside
// it (other Applications' checkouts) its own.
func openCmpRepo(cwd, sourcePath string) (*cmpRepo, error) {
	src, err := filepath.Abs(cwd)
	if err == nil {
		src, err = filepath.EvalSymlinks(src)
	}
	if err != nil {
		return nil, fmt.Errorf("the source folder %s: %w", cwd, err)
	}
	var clean []string
	for _, part := range strings.Split(sourcePath, "/") {
		switch part {
		case "", ".":
		case "..":
			if len(clean) == 0 {
				return nil, fmt.Errorf("ARGOCD_APP_SOURCE_PATH %q: leaves the repository", sourcePath)
			}
			clean = clean[:len(clean)-1]
		default:
			clean = append(clean, part)
		}
	}
	r := &cmpRepo{dir: src, sourcePath: sourcePath}
	if r.sourcePath == "" {
		r.sourcePath = "the source folder"
	}
	if len(clean) > 0 {
		r.src = strings.Join(clean, "/")
		dir, ok := strings.CutSuffix(src, "/"+r.src)
		if !ok {
			return nil, fmt.Errorf("ARGOCD_APP_SOURCE_PATH %q: goes through a symbolic link (the folder is %s); name the folder itself", sourcePath, src)
		}
		if dir == "" {
			dir = "/"
		}
		r.dir = dir
	}
	if r.root, err = os.OpenRoot(r.dir); err != nil {
		return nil, fmt.Errorf("opening the repository %s: %w", r.dir, err)
	}
	return r, nil
}

// Close closes the repository's root.
func (r *cmpRepo) Close() error { return r.root.Close() }

// inSource returns the path name, relative to the source folder, as a
// path relative to the repository (not cleaned: its links decide what
// ".." means).
func (r *cmpRepo) inSource(name string) string {
	if r.src == "" {
		return name
	}
	return r.src + "/" + name
}

// checkLinks checks every symbolic link of the repository: none may point
// outside it (Argo CD's own rule, unless its repo server runs with
// --allow-oob-symlinks), not even by way of another link, and each must
// be one that can be followed (a link to a missing file inside is fine).
// Helm reads a chart's files through links (.Files.Get), kustomize its
// resources, and a link to the sidecar's docker config or Redis password
// would render them into the manifests. A folder of the repository that
// cannot be read fails the check, rather than go unchecked.
func (r *cmpRepo) checkLinks() error {
	return fs.WalkDir(r.root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s: cannot be read: %w", name, err)
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := r.root.Readlink(name)
		if err != nil {
			return fmt.Errorf("%s: a symbolic link that cannot be followed", name)
		}
		switch _, err := resolveInRepo(r.root, name, true); {
		case errors.Is(err, errOutside):
			return fmt.Errorf("%s: a symbolic link to outside the repository (%s); Argo CD refuses those too", name, target)
		case err != nil:
			return fmt.Errorf("%s: a symbolic link that cannot be followed", name)
		}
		return nil
	})
}

// resolveInRepo returns name, a path relative to root, with every symbolic
// link followed and every "." and ".." applied in order, as realpath
// does, as a clean path relative to root ("." for root itself). It never
// looks outside root: a ".." above it, or an absolute link, is errOutside
// at once, whatever lies there. With missingOK (realpath -m), the first
// missing component and all after it are taken as they are written;
// without, a missing component is the file system's error.
func resolveInRepo(root *os.Root, name string, missingOK bool) (string, error) {
	var done []string
	todo := strings.Split(name, "/")
	links, missing := 0, false
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", errOutside
			}
			done = done[:len(done)-1]
			continue
		}
		if missing {
			done = append(done, part)
			continue
		}
		p := strings.Join(append(done[:len(done):len(done)], part), "/")
		fi, err := root.Lstat(p)
		if err != nil {
			if missingOK && (errors.Is(err, fs.ErrNotExist) || isNotDir(err)) {
				missing = true
				done = append(done, part)
				continue
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, part)
			continue
		}
		if links++; links > cmpMaxLinks {
			return "", errLoop
		}
		target, err := root.Readlink(p)
		if err != nil {
			return "", err
		}
		if target == "" || strings.HasPrefix(target, "/") {
			return "", errOutside
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

// file checks that name, a path an Application names (what it is, for
// the message), is a relative path to a regular file of at most
// cmpMaxFileSize bytes inside the repository, every symbolic link
// followed, and returns its path relative to the repository, links
// resolved, and its absolute path (so that a tool never reads the
// Application's text as anything else: a URL, a flag).
func (r *cmpRepo) file(what, name string) (rel, abs string, err error) {
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return "", "", fmt.Errorf("%s %s: want a path relative to the source folder", what, name)
	}
	noSuch := fmt.Errorf("%s %s: no such file in the source folder", what, name)
	if name == "" {
		return "", "", noSuch
	}
	rel, err = resolveInRepo(r.root, r.inSource(name), false)
	switch {
	case errors.Is(err, errOutside), err == nil && rel == ".":
		return "", "", fmt.Errorf("%s %s: outside the repository", what, name)
	case err != nil:
		return "", "", noSuch
	}
	fi, err := r.root.Stat(rel)
	switch {
	case err != nil:
		return "", "", noSuch
	case !fi.Mode().IsRegular():
		return "", "", fmt.Errorf("%s %s: not a regular file", what, name)
	case strings.HasSuffix(name, "/"):
		// realpath: a file is no folder.
		return "", "", noSuch
	case fi.Size() > cmpMaxFileSize:
		return "", "", fmt.Errorf("%s %s: %d bytes, more than %d (64 MiB)", what, name, fi.Size(), cmpMaxFileSize)
	}
	return rel, filepath.Join(r.dir, filepath.FromSlash(rel)), nil
}

// isFile reports whether name, relative to the source folder, is a
// regular file (through links inside the repository), as bash's -f.
func (r *cmpRepo) isFile(name string) bool {
	rel, err := resolveInRepo(r.root, r.inSource(name), false)
	if err != nil {
		return false
	}
	fi, err := r.root.Stat(rel)
	return err == nil && fi.Mode().IsRegular()
}

// exists reports whether name, relative to the source folder, exists or
// is a symbolic link (bash's -e or -L), looking only inside the
// repository: a path that leads out of it "exists", so that it is
// checked, and refused, rather than ignored.
func (r *cmpRepo) exists(name string) bool {
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return true
	}
	rel, err := resolveInRepo(r.root, r.inSource(name), true)
	if err != nil {
		return true
	}
	if _, err := r.root.Lstat(rel); err == nil {
		return true
	}
	// A link to a missing file is a link (-L).
	fi, err := r.root.Lstat(r.inSource(name))
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// isNotDir reports whether err is the file system's "not a directory": a
// path that goes on below a file.
func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }
