#!/usr/bin/env bash
# Everything the tests need that npm does not install; `npm test` runs it first (vitest's global
# setup), so the README's test command works on a fresh machine. Nothing else runs it, CI included.
# Builds the real-cluster test bed, or reuses it from the cache: etcd, kube-apiserver, kubelet,
# kube-controller-manager, kube-scheduler, kube-proxy, CRI-O (with its pinns helper) and the distribution
# registry v3 (the in-cluster cache's engine), operator-registry's opm and OLM v0's catalog operator from the Go module proxy, pinned by the modules in tools/testbed/; conmon, crun, runc, CNI plugins, openssl,
# htpasswd and docker-registry from Debian. Idempotent: a component is rebuilt only
# when its binary for that version is missing. Prints per-component and total build times.
#
#   scripts/build-testbed.sh          build what is missing
#   scripts/build-testbed.sh --json   the same, logging to stderr; stdout is one JSON object with
#                                     the binaries' paths (the test harness reads it)
#   scripts/build-testbed.sh --packages-only [PKG...]
#                                     only the Debian packages, plus PKG (the benches add skopeo)
#   scripts/build-testbed.sh --packages PKG...
#                                     only PKG (npm run demo installs docker-registry this way)
#
# Cache: $PRESTAGE_TESTBED_CACHE, default ~/.cache/prestage-testbed/v1/<component>-<version>/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/tools/testbed
CACHE=${PRESTAGE_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/prestage-testbed/v1}
# openpgp: signature checks in pure Go instead of cgo gpgme; btrfs: no libbtrfs headers needed.
CRIO_TAGS='containers_image_openpgp exclude_graphdriver_btrfs'
# Runtime: conmon, crun (CRI-O's monitor and OCI runtime), openssl (the test PKI),
# docker-registry (the test registry), apache2-utils (htpasswd: the Basic-auth registry's users),
# ca-certificates (the OS trust store the TLS tests read), tinyproxy (a real forward proxy for the
# HTTPS_PROXY tests). Build: gcc and libc6-dev (cgo, static pinns).
# The DaemonSet test (a real kubelet running containers): runc (crun 1.8.1 rejects the OCI spec
# version CRI-O 1.34 writes), jq (its runc shim edits config.json), containernetworking-plugins
# (a loopback CNI network, so the runtime reports NetworkReady; the cache test's bridge network),
# busybox-static (the pause image), iptables (kube-proxy's rules for the cache test's ClusterIP), gnupg (the
# release signatures the signature tests and bench:bundle make with the real gpg).
# chromium-headless-shell: the HTML report test's real browser (test/harness/chromium.ts).
DEBIAN_PACKAGES=(conmon crun openssl docker-registry apache2-utils ca-certificates tinyproxy gcc libc6-dev runc jq containernetworking-plugins busybox-static iptables gnupg chromium-headless-shell)

json=false packages_only=false
case ${1:-} in
  --json) json=true ;;
  --packages-only) packages_only=true; DEBIAN_PACKAGES+=("${@:2}") ;;
  # Only the named packages (npm run demo: docker-registry), nothing else of the test bed.
  --packages) packages_only=true; DEBIAN_PACKAGES=("${@:2}") ;;
esac
log() { if $json; then echo "testbed: $*" >&2; else echo "testbed: $*"; fi; }
die() { echo "testbed: ERROR: $*" >&2; exit 1; }

install_debian_packages() {
  local missing=() pkg
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
  done
  ((${#missing[@]} == 0)) && return
  [[ $(id -u) == 0 ]] || die "missing Debian packages: ${missing[*]} (run: sudo apt-get install ${missing[*]})"
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get -o DPkg::Lock::Timeout=600 update -qq && apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"; } >&2 \
    || die "apt-get install ${missing[*]} failed"
}

# The version a tool module requires of a module, from its go.mod (one-line or block require).
required_version() {
  local version
  version=$(awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$TOOLS/$1/go.mod")
  [[ -n $version ]] || die "tools/testbed/$1/go.mod does not require $2"
  echo "$version"
}

built=()
# build NAME VERSION FUNCTION: runs FUNCTION with $out set to a temporary path, then moves the
# result into the cache, so an interrupted build never leaves a half-written binary behind.
build() {
  local name=$1 version=$2 step=$3
  local dir=$CACHE/$name-$version
  local bin=$dir/$name
  if [[ -x $bin ]]; then
    log "$name $version: cached"
    paths+=("\"$name\": \"$bin\"")
    return
  fi
  mkdir -p "$dir"
  out=$dir/.$name.partial.$$
  local started=$SECONDS
  log "$name $version: building (cold builds take minutes on 2 cores)"
  if ! "$step" >&2; then
    rm -f "$out"
    die "building $name $version failed; see the output above"
  fi
  mv -f "$out" "$bin"
  log "$name $version: built in $((SECONDS - started))s"
  built+=("$name")
  paths+=("\"$name\": \"$bin\"")
}

go_build() { # go_build MODULE_DIR PACKAGE EXTRA_LDFLAGS [go build flags...]
  local module=$1 package=$2 ldflags=$3
  shift 3
  (cd "$TOOLS/$module" && go build -ldflags="-s -w $ldflags" "$@" -o "$out" "$package")
}
build_etcd() { go_build etcd prestage.test/testbed/etcd ''; }
# Kubernetes stamps its version at link time (hack/lib/version.sh); without it /version says
# v0.0.0-master (and a kubelet would register as v0.0.0).
build_kube_command() { # build_kube_command NAME (a k8s.io/kubernetes/cmd/NAME)
  local minor=${kube_version#v1.} stamp='' package
  minor=${minor%%.*}
  for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp+=" -X $package.gitVersion=$kube_version -X $package.gitMajor=1 -X $package.gitMinor=$minor -X $package.gitTreeState=clean"
  done
  go_build kube "k8s.io/kubernetes/cmd/$1" "$stamp"
}
build_kube_apiserver() { build_kube_command kube-apiserver; }
# The DaemonSet test only; they share most packages with kube-apiserver, so they build in minutes.
build_kubelet() { build_kube_command kubelet; }
build_kube_controller_manager() { build_kube_command kube-controller-manager; }
build_kube_scheduler() { build_kube_command kube-scheduler; }
# The GitOps test: a real `kubectl wait --for=condition=Ready`, the API server's own version.
build_kubectl() { build_kube_command kubectl; }
# The GitOps test's helper: kstatus (sigs.k8s.io/cli-utils, as Flux computes health) and Argo CD's
# Lua engine (gopher-lua); keyed by its sources, so an edit rebuilds it.
build_gitops_check() { go_build gitops-check prestage.test/gitops-check ''; }
# The cache test: host-network clients (CRI-O) reach a Service's ClusterIP through kube-proxy's rules.
build_kube_proxy() { build_kube_command kube-proxy; }
# The cache's engine (`registry:3` in clusters): distribution 3, whose proxy fetches a missing blob
# upstream once; Debian's docker-registry is 2.8 (twice). Pure Go.
build_distribution() { CGO_ENABLED=0 go_build distribution github.com/distribution/distribution/v3/cmd/registry ''; }
# The operator bundle test: operator-registry's real opm (validate, render, serve) checks the catalog
# `bundle create` rebuilds. cgo for its SQLite commands; tags as its Makefile builds it.
build_opm() {
  CGO_ENABLED=1 go_build opm github.com/operator-framework/operator-registry/cmd/opm "-X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$opm_version" -tags json1,containers_image_openpgp
}
# The OLM test: OLM v0's catalog operator (cmd/catalog: its Subscription resolver, CatalogSource
# and InstallPlan controllers), run against the test bed's API server. Pure Go, built as its
# Makefile builds it (CGO_ENABLED=0, -tags json1, the version stamped into pkg/version).
build_olm_catalog() {
  CGO_ENABLED=0 go_build olm-catalog github.com/operator-framework/operator-lifecycle-manager/cmd/catalog "-X github.com/operator-framework/operator-lifecycle-manager/pkg/version.OLMVersion=$olm_version" -tags json1
}
build_crio() { CGO_ENABLED=1 go_build crio github.com/cri-o/cri-o/cmd/crio '' -tags "$CRIO_TAGS"; }
# pinns (C, in the cri-o module's source) pins namespaces for pod sandboxes. The proof tests
# create no sandboxes, but CRI-O refuses to start without it, so build the real one.
# OpenShift's own CRDs, as they ship in the Go module github.com/openshift/api: the MCO's
# (PinnedImageSet, MachineConfigNode, MachineConfigPool) and the cluster's (ClusterVersion,
# Infrastructure, FeatureGate). release-4.16 serves PinnedImageSet and MachineConfigNode at v1alpha1
# under TechPreviewNoUpgrade; release-4.21 at v1; main (Aug 2026, the 5.0 era) adds OSImageStream and
# pools that name an OS stream, and its payload's FeatureGate manifests (payload-manifests/featuregates,
# one per cluster profile and feature set). Only the CRD folders and those manifests are kept.
OPENSHIFT_API_MODULE=github.com/openshift/api
declare -A OPENSHIFT_API=([release-4.16]=v0.0.0-20260113171308-0677a8879a46 [release-4.21]=v0.0.0-20260710095909-1cb630ce7109 [main]=v0.0.0-20260810132456-8f52beb625b5)
build_openshift_api() { # $out is a directory here
  local source folder
  source=$(cd "$TOOLS" && go mod download -json "$OPENSHIFT_API_MODULE@$openshift_api_version" | awk -F'"' '$2 == "Dir" { print $4 }')
  [[ -d $source ]] || die "go mod download $OPENSHIFT_API_MODULE@$openshift_api_version gave no directory"
  for folder in machineconfiguration/v1 machineconfiguration/v1alpha1 config/v1; do
    [[ -d $source/$folder/zz_generated.crd-manifests ]] || continue
    mkdir -p "$out/$folder"
    cp "$source/$folder"/zz_generated.crd-manifests/*.yaml "$out/$folder/"
  done
  if [[ -d $source/payload-manifests/featuregates ]]; then
    mkdir -p "$out/payload-manifests/featuregates"
    cp "$source"/payload-manifests/featuregates/*.yaml "$out/payload-manifests/featuregates/"
  fi
}

# OLM's own CRDs, as its Go modules ship them: github.com/operator-framework/api's crds/ (OLM v0:
# Subscription, ClusterServiceVersion, CatalogSource, ...) and operator-controller's (OLM v1:
# ClusterExtension, ClusterCatalog, under config/base/*/crd/bases). The module proxy here serves
# operator-controller v1.2.0 and refuses v1.3.0, v1.4.0, v1.5.0 (403) and its version list.
declare -A OLM_CRDS=(
  [api]="github.com/operator-framework/api v0.40.0 crds"
  [operatorController]="github.com/operator-framework/operator-controller v1.2.0 config/base/operator-controller/crd/bases config/base/catalogd/crd/bases"
)
fetch_module_crds() { # fetch_module_crds MODULE VERSION FOLDER...: the folders' YAML files into $out
  local module=$1 version=$2 source folder
  shift 2
  source=$(cd "$TOOLS" && go mod download -json "$module@$version" | awk -F'"' '$2 == "Dir" { print $4 }')
  [[ -d $source ]] || die "go mod download $module@$version gave no directory"
  for folder in "$@"; do
    compgen -G "$source/$folder/*.yaml" >/dev/null || die "$module@$version has no CRDs in $folder"
    cp "$source/$folder"/*.yaml "$out/"
  done
}

build_pinns() {
  local source
  source=$(cd "$TOOLS/crio" && go mod download -json github.com/cri-o/cri-o | awk -F'"' '$2 == "Dir" { print $4 }')
  [[ -d $source/pinns/src ]] || die "no pinns sources in the cri-o module ($source)"
  gcc -std=c99 -Os -Wall -Wextra -static -o "$out" "$source"/pinns/src/*.c
}

started=$SECONDS
install_debian_packages
$packages_only && exit 0
[[ -x /usr/local/go/bin/go ]] && PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || die "go is not installed (needed to build the test bed)"
# Reproducible, small binaries; go.sum in each tool module pins every dependency.
export GOFLAGS='-trimpath -mod=readonly -buildvcs=false'
mkdir -p "$CACHE"
# One build at a time per cache (CI's step and a test's fallback may race).
exec 9>"$CACHE/.lock"
flock 9

etcd_version=$(required_version etcd go.etcd.io/etcd/server/v3)
kube_version=$(required_version kube k8s.io/kubernetes)
crio_version=$(required_version crio github.com/cri-o/cri-o)
distribution_version=$(required_version distribution github.com/distribution/distribution/v3)
opm_version=$(required_version opm github.com/operator-framework/operator-registry)
olm_version=$(required_version olm-catalog github.com/operator-framework/operator-lifecycle-manager)

paths=()
build etcd "$etcd_version" build_etcd
build kube-apiserver "$kube_version" build_kube_apiserver
build kubelet "$kube_version" build_kubelet
build kube-controller-manager "$kube_version" build_kube_controller_manager
build kube-scheduler "$kube_version" build_kube_scheduler
build kube-proxy "$kube_version" build_kube_proxy
build kubectl "$kube_version" build_kubectl
build gitops-check "$(cat "$TOOLS/gitops-check/go.mod" "$TOOLS/gitops-check/go.sum" "$TOOLS/gitops-check/main.go" | sha256sum | cut -c1-12)" build_gitops_check
build crio "$crio_version" build_crio
build pinns "$crio_version" build_pinns
build distribution "$distribution_version" build_distribution
build opm "$opm_version" build_opm
build olm-catalog "$olm_version" build_olm_catalog
openshift_api=()
for release in "${!OPENSHIFT_API[@]}"; do
  openshift_api_version=${OPENSHIFT_API[$release]}
  dir=$CACHE/openshift-api-$openshift_api_version
  if [[ -d $dir/crds ]]; then
    log "openshift-api $openshift_api_version ($release): cached"
  else
    out=$dir/.crds.partial.$$
    rm -rf "$out"; mkdir -p "$out"
    build_openshift_api || die "fetching $OPENSHIFT_API_MODULE@$openshift_api_version failed"
    mv "$out" "$dir/crds"
    log "openshift-api $openshift_api_version ($release): fetched"
  fi
  openshift_api+=("\"$release\": \"$dir/crds\"")
done

olm_crds=()
for key in "${!OLM_CRDS[@]}"; do
  read -r module version folders <<<"${OLM_CRDS[$key]}"
  name=${module#github.com/}
  dir=$CACHE/${name//\//-}-$version
  if [[ -d $dir/crds ]]; then
    log "$module $version CRDs: cached"
  else
    out=$dir/.crds.partial.$$
    rm -rf "$out"; mkdir -p "$out"
    # shellcheck disable=SC2086 # the folders are words
    fetch_module_crds "$module" "$version" $folders || die "fetching the CRDs of $module@$version failed"
    mv "$out" "$dir/crds"
    log "$module $version CRDs: fetched"
  fi
  olm_crds+=("\"$key\": \"$dir/crds\"")
done

log "total $((SECONDS - started))s (built: ${built[*]:-nothing, all cached}) in $CACHE"
if $json; then
  printf '{%s, "openshiftApi": {%s}, "olmCrds": {%s}, "conmon": "%s", "crun": "%s", "runc": "%s", "cniPlugins": "%s", "busybox": "%s", "versions": {"etcd": "%s", "kube-apiserver": "%s", "crio": "%s", "distribution": "%s"}}\n' \
    "$(IFS=,; echo "${paths[*]}")" "$(IFS=,; echo "${openshift_api[*]}")" "$(IFS=,; echo "${olm_crds[*]}")" "$(command -v conmon)" "$(command -v crun)" "$(command -v runc || echo /usr/sbin/runc)" /usr/lib/cni /bin/busybox "$etcd_version" "$kube_version" "$crio_version" "$distribution_version"
fi
