#!/usr/bin/env bash
# The images the Kubernetes conformance suite runs, without a registry or
# Docker: OCI archives under the names the suite uses (k8s.io/kubernetes
# test/utils/image/manifest.go), which hack/conformance.sh has every real
# node of its tree import.
#
#   hack/conformance/images.sh AGNHOST OUTDIR [SAMPLE_APISERVER]
#
#   agnhost 2.59 (and 2.55)  the suite's own agnhost (AGNHOST, built from k8s.io/kubernetes at the
#                            pinned version) with what its image holds upstream: a shell and its
#                            tools (busybox), bash, curl, dig, nc, the porter's certificate,
#                            CoreDNS, the user and group the image defines
#   kitten, nautilus 1.7     agnhost serving their page (test-webserver), as upstream
#   busybox 1.37.0-1         Debian's busybox-static with every applet linked (and in /bin), bash as sh,
#                            getent (Debian's libc-bin)
#   nginx 1.14-4, 1.15-4     stand-ins: busybox's httpd serving "Welcome to nginx!" on port 80
#   jessie-dnsutils 1.7      busybox with dig and nslookup (Debian's dnsutils)
#   nonroot 1.4              busybox, running as user 1234
#   nonewprivs 1.3           busybox with the suite's nnp (k8s.io/kubernetes/test/images/nonewprivs,
#                            setuid root, as upstream)
#   sample-apiserver 1.29.2  k8s.io/sample-apiserver at its version, 0.29.2 (SAMPLE_APISERVER, when
#                            given) as /kube-sample-apiserver, beside etcd 3.6.6-0: the project's
#                            etcd (_output/bin/etcd) as /usr/local/bin/etcd
#   pause 3.10.1             Nestlet's pause (hack/images/pause)
#
# Programs from Debian packages (busybox-static, bash, curl, dnsutils,
# netcat-openbsd; installed when missing, as root) are copied with the
# shared libraries ldd names.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${ROOT}"
source hack/lib.sh

AGNHOST="$1"
OUT="$2"
SAMPLE_APISERVER="${3:-}"
E2E=registry.k8s.io/e2e-test-images
KUBE_DIR="$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)"
COREDNS="${ROOT}/_output/bin/node/coredns"

nestlet::apt_need busybox-static test -x /bin/busybox
nestlet::apt_need bash command -v bash
nestlet::apt_need curl command -v curl
nestlet::apt_need dnsutils command -v dig
nestlet::apt_need netcat-openbsd command -v nc.openbsd

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
mkdir -p "${OUT}"
(cd hack/images && go build -o "${work}/build-image" ./build-image &&
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${work}/pause" ./pause)

# with_libs ROOTFS FILE [AS]: copies a dynamically linked program into
# ROOTFS (at AS, default its own path), with the libraries and loader it needs.
with_libs() {
  local rootfs="$1" file="$2" as="${3:-$2}" lib
  install -D -m 0755 "${file}" "${rootfs}${as}"
  for lib in $(ldd "${file}" | grep -o '/[^ ]*'); do
    [[ -e "${rootfs}${lib}" ]] || install -D -m 0755 "$(readlink -f "${lib}")" "${rootfs}${lib}"
  done
}

# base ROOTFS: busybox with every applet, bash as /bin/sh, /etc for users
# and names, /tmp. Not busybox's sh: Debian's runs its own applets before
# the PATH's programs (nc, for one, without the options the suite passes
# it), and drops variables whose names are not a shell's (data-1), which
# the suite's busybox keeps.
base() {
  local rootfs="$1" applet
  mkdir -p "${rootfs}"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,var/run}
  chmod 1777 "${rootfs}/tmp"
  install -m 0755 /bin/busybox "${rootfs}/bin/busybox"
  for applet in $(/bin/busybox --list-full); do
    [[ -e "${rootfs}/${applet}" ]] || ln -s /bin/busybox "${rootfs}/${applet}"
    # and in /bin, as the suite's busybox has every applet (/bin/sysctl)
    [[ -e "${rootfs}/bin/${applet##*/}" ]] || ln -s busybox "${rootfs}/bin/${applet##*/}"
  done
  with_libs "${rootfs}" "$(command -v bash)" /usr/bin/bash
  with_libs "${rootfs}" "$(command -v getent)" /usr/bin/getent
  ln -sfn /usr/bin/bash "${rootfs}/bin/sh"
  ln -sfn /usr/bin/bash "${rootfs}/bin/bash"
  cat >"${rootfs}/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh
EOF
  cat >"${rootfs}/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
user-defined-in-image:x:1000:user-defined-in-image
group-defined-in-image:x:50000:user-defined-in-image
EOF
  echo "hosts: files dns" >"${rootfs}/etc/nsswitch.conf"
}

# image NAME ROOTFS ARGS...: builds OUT/NAME.tar (build-image's ARGS).
image() {
  local name="$1" rootfs="$2"
  shift 2
  "${work}/build-image" -root "${rootfs}" -out "${OUT}/${name}.tar" "$@" >&2
}

r="${work}/busybox"
base "${r}"
image busybox "${r}" -name "${E2E}/busybox:1.37.0-1" -cmd sh

r="${work}/nonroot"
base "${r}"
image nonroot "${r}" -name "${E2E}/nonroot:1.4" -user 1234 -cmd sh

r="${work}/nonewprivs"
base "${r}"
(cd hack/tools/conformance && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${r}/usr/local/bin/nnp" \
  k8s.io/kubernetes/test/images/nonewprivs)
chmod 4755 "${r}/usr/local/bin/nnp"
image nonewprivs "${r}" -name "${E2E}/nonewprivs:1.3" -cmd nnp

if [[ -n "${SAMPLE_APISERVER}" ]]; then
  "${work}/build-image" -name "${E2E}/sample-apiserver:1.29.2" -bin "${SAMPLE_APISERVER}" \
    -path /kube-sample-apiserver -entrypoint /kube-sample-apiserver -out "${OUT}/sample-apiserver.tar" >&2
  "${work}/build-image" -name registry.k8s.io/etcd:3.6.6-0 -bin "${ROOT}/_output/bin/etcd" \
    -path /usr/local/bin/etcd -out "${OUT}/etcd.tar" >&2
else
  rm -f "${OUT}/sample-apiserver.tar" "${OUT}/etcd.tar"
fi

r="${work}/nginx"
base "${r}"
mkdir -p "${r}/usr/share/nginx/html"
echo "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to nginx!</h1></body></html>" >"${r}/usr/share/nginx/html/index.html"
cat >"${r}/usr/sbin/nginx" <<'EOF'
#!/bin/sh
# A stand-in for nginx in the conformance suite's images: serves
# /usr/share/nginx/html on port 80, whatever the arguments.
exec httpd -f -p 80 -h /usr/share/nginx/html
EOF
chmod 0755 "${r}/usr/sbin/nginx"
image nginx "${r}" -name "${E2E}/nginx:1.14-4" -tag "${E2E}/nginx:1.15-4" -cmd nginx -cmd -g -cmd "daemon off;" -expose 80/tcp

r="${work}/jessie-dnsutils"
base "${r}"
for p in dig nslookup; do
  with_libs "${r}" "$(command -v "${p}")" "/usr/bin/${p}"
done
install -m 0755 "${COREDNS}" "${r}/coredns"
image jessie-dnsutils "${r}" -name "${E2E}/jessie-dnsutils:1.7" -cmd /bin/bash

r="${work}/agnhost"
base "${r}"
for p in curl dig; do
  with_libs "${r}" "$(command -v "${p}")" "/usr/bin/${p}"
done
rm -f "${r}/usr/bin/nc" "${r}/bin/nc"
with_libs "${r}" "$(command -v nc.openbsd)" /usr/bin/nc
install -m 0755 "${COREDNS}" "${r}/coredns"
install -m 0755 "${AGNHOST}" "${r}/agnhost"
ln -s agnhost "${r}/agnhost-2"
mkdir -p "${r}/uploads" "${r}/home/user-defined-in-image"
install -m 0644 "${KUBE_DIR}/test/images/agnhost/porter/localhost.crt" "${KUBE_DIR}/test/images/agnhost/porter/localhost.key" "${r}/"
image agnhost "${r}" -name "${E2E}/agnhost:2.59" -tag "${E2E}/agnhost:2.55" -entrypoint /agnhost -cmd pause

for pet in kitten nautilus; do
  cp -a "${r}" "${work}/${pet}"
  install -m 0644 "${KUBE_DIR}/test/images/${pet}/html/${pet}.jpg" "${KUBE_DIR}/test/images/${pet}/html/data.json" "${work}/${pet}/"
  image "${pet}" "${work}/${pet}" -name "${E2E}/${pet}:1.7" -entrypoint /agnhost -cmd test-webserver
done

"${work}/build-image" -name registry.k8s.io/pause:3.10.1 -bin "${work}/pause" -path /pause -out "${OUT}/pause.tar" >&2
echo "[conformance] images in ${OUT}: $(cd "${OUT}" && ls -- *.tar | tr '\n' ' ')" >&2
