//go:build !linux

package check

import "errors"

func sandboxSupported() error {
	return errors.New("the read sandbox needs Linux Landlock")
}

func restrictReads([]string) error { return sandboxSupported() }
