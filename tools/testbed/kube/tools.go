//go:build tools

// Package tools pins the Kubernetes binaries the test bed runs into this module's build graph so
// that `go build k8s.io/kubernetes/cmd/<name>` resolves from go.sum: kube-apiserver for every
// cluster test; kubelet, kube-controller-manager and kube-scheduler for the DaemonSet test; kubectl
// for the GitOps test (`kubectl wait --for=condition=Ready`).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
