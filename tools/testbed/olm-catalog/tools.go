//go:build tools

// Package tools pins OLM v0's catalog operator into this module's build graph: the OLM test runs
// the real resolver (Subscriptions against a CatalogSource serving prestage's filtered catalog)
// against the test bed's kube-apiserver, to check that what prestage stages is what OLM installs.
package tools

import _ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
