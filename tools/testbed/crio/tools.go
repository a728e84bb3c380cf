//go:build tools

// Package tools pins the CRI-O daemon into this module's build graph. `go install
// github.com/cri-o/cri-o/cmd/crio@version` would be simpler but asks the proxy for the
// module's version list (to look for deprecations), which the proxy here refuses.
package tools

import _ "github.com/cri-o/cri-o/cmd/crio"
