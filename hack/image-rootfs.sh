#!/usr/bin/env bash
# Builds in DEST the root filesystem of the image, all but the vip-allocator
# binary itself (static; the Dockerfile and the tests add it): the iptables and
# ip6tables commands of both backends (nft and legacy: the node decides which),
# their extension modules and exactly the shared libraries they load (ldd), a
# passwd file with the non-root user the operator runs as, and nothing else -
# no shell, no package manager. The Dockerfile copies DEST into an empty
# image; the tests run DEST in a chroot.
#
#   hack/image-rootfs.sh DEST      (run on a merged-/usr Debian with iptables installed)
set -euo pipefail
dest=${1:?usage: $0 DEST}
# /dev and /proc are mounted by the container runtime.
mkdir -p "$dest"/usr/{bin,sbin,lib,lib64} "$dest"/{etc,tmp,run,dev,proc}
chmod 1777 "$dest/tmp"
for d in bin sbin lib lib64; do [[ -e $dest/$d ]] || ln -s "usr/$d" "$dest/$d"; done

# copy PATH into DEST at the same place, following and recreating symlinks.
copy() {
  local p=$1 link
  while :; do
    [[ -e $dest$p || -L $dest$p ]] && [[ ! -L $p ]] && return
    mkdir -p "$dest$(dirname "$p")"
    if [[ -L $p ]]; then
      [[ -L $dest$p ]] || cp -P "$p" "$dest$p"
      link=$(readlink "$p")
      [[ $link == /* ]] && p=$link || p=$(dirname "$p")/$link
    else
      cp "$p" "$dest$p"
      return
    fi
  done
}

# copy_with_libs copies a binary or module and the shared libraries it loads.
copy_with_libs() {
  copy "$1"
  local lib
  for lib in $(ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    copy "$lib"
  done
}

for fam in iptables ip6tables; do
  for backend in nft legacy; do
    for suffix in "" -save -restore; do
      p=$(command -v "$fam-$backend$suffix") || { echo "$fam-$backend$suffix is not installed" >&2; exit 1; }
      copy "$p"
    done
  done
done
for multi in xtables-nft-multi xtables-legacy-multi; do copy_with_libs "$(command -v $multi)"; done
# Matches and targets (-m comment, DNAT, MASQUERADE, ...) are modules loaded at run time.
mod=$(find /usr/lib -name libxt_comment.so -print -quit)
[[ -n $mod ]] || { echo "no xtables extension modules found" >&2; exit 1; }
for m in "$(dirname "$mod")"/*.so; do copy_with_libs "$m"; done
# iptables resolves protocol names (-p tcp) through /etc/protocols.
copy /etc/protocols

cat > "$dest/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat > "$dest/etc/group" <<GROUP
root:x:0:
nonroot:x:65532:
GROUP
