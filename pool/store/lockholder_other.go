//go:build !linux

package store

import "os"

// lockHolder cannot name the holder of a flock outside Linux.
func lockHolder(*os.File) string { return "" }
