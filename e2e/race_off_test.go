//go:build !race

package e2e

const raceBinary = false
