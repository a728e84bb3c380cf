//go:build tools

// Package tools pins kube-apiserver into this module's build graph so that
// `go build k8s.io/kubernetes/cmd/kube-apiserver` resolves from go.sum.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
