//go:build tools

// Package tools pins operator-registry's opm into this module's build graph: the bundle tests
// check the catalog `bundle create` rebuilds with the real `opm validate`, `opm render` and
// `opm serve`, as a cluster's CatalogSource pod would serve it.
package tools

import _ "github.com/operator-framework/operator-registry/cmd/opm"
