//go:build tools

// Package tools pins the CNCF distribution registry (v3) into this module's build graph: the
// in-cluster cache's engine (`registry:3`), whose proxy fetches a missing blob from upstream once
// and tees it into storage and the answer. Debian ships only 2.8, which fetches it twice.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
