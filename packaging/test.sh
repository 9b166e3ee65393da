#!/bin/sh
# braid's Debian package: builds it (packaging/build-deb from a fresh
# ansible/build-artifacts, or from $BRAID_ANSIBLE_ARTIFACTS when set), checks
# its file list, modes and fields with dpkg-deb, runs lintian when it is
# installed, and (as root) installs it for real into the Ansible tests'
# cached Debian 12 root filesystem (ansible/tests/debian_rootfs.py; built
# with debootstrap only when the cache has none): the commands run there,
# the plugin sits where mptcpd loads plugins from, systemd-analyze verify
# accepts the units and mptcp.service with gwsteer's drop-in, a reinstall
# remakes the venv (pip's environment variables ignored), remove takes the
# venv and keeps /etc/braid with the operator's file, purge takes the rest.
# SKIP_CONVERGE=1 (as for ansible/test.sh) leaves the install out.
# With the rootfs cached: about 40 s of CPU, 40 s on an idle 2-core
# machine, up to two minutes when other jobs share it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
start=$(date +%s)
work=$(mktemp -d)
# --one-file-system: never follow a mount into the host, should one be left.
trap 'rm -rf --one-file-system "$work"' EXIT

fail() {
	echo "packaging test FAILED: $*" >&2
	exit 1
}

. "$repo/ansible/tests/backstop.sh"

artifacts=${BRAID_ANSIBLE_ARTIFACTS:-}
if [ -z "$artifacts" ]; then
	echo "=== building the artifacts"
	artifacts=$work/artifacts
	timeout "$(backstop 600)" "$repo/ansible/build-artifacts" "$artifacts" >"$work/artifacts.log" 2>&1 ||
		{ cat "$work/artifacts.log"; fail "ansible/build-artifacts"; }
fi
echo "=== building the package ($(($(date +%s) - start))s)"
limit=$(backstop 300)
timeout "$limit" "$repo/packaging/build-deb" "$artifacts" "$work/out" >"$work/build-deb.out" ||
	fail "build-deb exited with $? (124: it ran past its $limit s limit)"
deb=$(tail -n 1 "$work/build-deb.out")
[ -f "$deb" ] || fail "build-deb made no package"
echo "$deb"

echo "=== fields"
field() {
	dpkg-deb -f "$deb" "$1"
}
[ "$(field Package)" = braid ] || fail "Package: $(field Package)"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture: $(field Architecture)"
version=$(field Version)
pyversion=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$repo/pyproject.toml")
commit=$(git -C "$repo" rev-parse --short=12 HEAD)
short=$(git -C "$repo" rev-parse --short=7 HEAD)
echo "$version" | grep -Eq "^$pyversion\+git[0-9]{14}\.$commit(\.dirty)?\$" ||
	fail "Version $version is not $pyversion+git<time>.$commit"
# dpkg's own check of the version's syntax, and the order of two builds.
dpkg --compare-versions "$version" gt "$pyversion" || fail "Version $version does not sort after $pyversion"
[ "${deb##*/}" = "braid_${version}_$(field Architecture).deb" ] || fail "file name ${deb##*/}"
depends=$(field Depends)
for dep in mptcpd python3 python3-venv iproute2 libmptcpd3 libell0; do
	echo "$depends" | tr ',' '\n' | grep -Eq "^ *$dep( |\$)" || fail "Depends lacks $dep: $depends"
done
for sug in tor openvpn; do
	echo "$(field Recommends), $(field Suggests)" | tr ',' '\n' | grep -Eq "^ *$sug( |\$)" ||
		fail "neither Recommends nor Suggests names $sug"
done

echo "=== file list and modes"
dpkg-deb -c "$deb" | awk '{ line = $1 " " $2 " " $6; if ($7 != "") line = line " " $7 " " $8; print line }' >"$work/list"
plugindir=$(pkg-config --variable=plugindir mptcpd)
# mode owner/group path [-> target]
expect() {
	grep -qxF -e "$1 root/root ./$2" "$work/list" || { grep -F -e "./$2" "$work/list" >&2 || true; fail "want $1 root/root ./$2"; }
}
for bin in braid-proxy braid-pt gwsteer-check; do
	expect -rwxr-xr-x "usr/bin/$bin"
done
expect -rw-r--r-- "${plugindir#/}/gwsteer.so"
expect drwxr-x--- etc/braid/
for tool in braid gwsteer-route gwsteer-cli braid-tor braid-openvpn; do
	expect lrwxrwxrwx "usr/bin/$tool -> ../lib/braid/venv/bin/$tool"
done
for unit in braid-gwsteer-route.service braid-openvpn@.service braid-proxy-client.service braid-proxy-server.service \
	braid-tor-client.service braid-tor-bridge.service; do
	expect -rw-r--r-- "usr/lib/systemd/system/$unit"
done
expect -rw-r--r-- usr/share/braid/systemd/mptcp.service.d/braid-gwsteer.conf
expect -rw-r--r-- usr/share/braid/wheels/requirements.txt
expect -rw-r--r-- usr/share/doc/braid/examples/gateways.conf
expect -rw-r--r-- usr/share/doc/braid/copyright
# Every unit's Documentation= is in the package.
for url in $(cat "$repo"/mptcpd-plugins/contrib/*.service "$repo"/mptcpd-plugins/contrib/mptcp.service.d/*.conf \
	"$repo"/proxy/contrib/*.service | sed -n 's|^Documentation=file:///||p' | sort -u); do
	expect -rw-r--r-- "$url"
done
# The wheels and pins are build-artifacts' own.
cmp -s "$artifacts/wheels/requirements.txt" - <<EOF || fail "the package's requirements.txt is not build-artifacts'"
$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/share/braid/wheels/requirements.txt)
EOF
# Nothing the package ships is in /etc but the empty /etc/braid (the
# operator's files are no conffiles), nothing in /usr/local or /opt.
if grep -v -e ' \./usr/' -e ' \./$' -e ' \./etc/$' -e ' \./etc/braid/$' "$work/list"; then
	fail "files outside /usr (above)"
fi

if command -v lintian >/dev/null; then
	echo "=== lintian ($(($(date +%s) - start))s)"
	# Left on purpose (docs/deploy.md, "Packages"): the default maintainer
	# address (BRAID_DEB_MAINTAINER sets one) and the console scripts'
	# missing manual pages (each has --help).
	(cd "$work" && timeout "$(backstop 120)" lintian --fail-on error,warning \
		--suppress-tags bogus-mail-host,bogus-mail-host-in-debian-changelog,no-manual-page "$deb") ||
		fail "lintian"
else
	echo "=== lintian SKIPPED (not installed: scripts/install-deps)"
fi

skip_install() {
	echo "=== install into a Debian 12 root filesystem SKIPPED ($1)"
	echo "=== packaging tests passed ($(($(date +%s) - start))s)"
	exit 0
}
[ "$(id -u)" = 0 ] || skip_install "needs root: chroot"
# scripts/test builds the rootfs in the background unless SKIP_CONVERGE=1;
# then this does not debootstrap one either.
[ "${SKIP_CONVERGE:-0}" != 1 ] || skip_install "SKIP_CONVERGE=1"

echo "=== Debian 12 root filesystem ($(($(date +%s) - start))s)"
tarball=$(cd "$repo/ansible/tests" && timeout "$(backstop 1200)" python3 -c \
	'from debian_rootfs import cached_rootfs_tarball; print(cached_rootfs_tarball())')
root=$work/rootfs
mkdir "$root"
tar --zstd --numeric-owner -C "$root" -xf "$tarball"
cp "$deb" "$root/tmp/"
debname=${deb##*/}

# in_root SCRIPT: SCRIPT run by sh in the root filesystem, with /proc and
# /dev mounted in a mount namespace of its own (gone when it ends); no
# systemd runs there, so postinst skips daemon-reload.
in_root() {
	timeout "$(backstop 300)" unshare --mount --propagation private sh -euc '
		mount -t proc proc "$1/proc"
		mount --rbind /dev "$1/dev"
		exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
			/bin/sh -euc "$2"' sh "$root" "$1"
}

echo "=== apt-get install /tmp/$debname ($(($(date +%s) - start))s)"
# The root filesystem holds every dependency already (the roles' packages):
# apt resolves them against what is installed and needs no package lists
# (nor network).
in_root "apt-get install -y -q /tmp/$debname >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }"

echo "=== installed ($(($(date +%s) - start))s)"
in_root "
	for tool in braid-proxy braid-pt gwsteer-check; do
		v=\$(\$tool --version) && echo \"\$v\"
		# braid's release and the commit it was built from, as the package's.
		case \"\$v\" in
		*' $pyversion ('*'$short'*) ;;
		*) echo \"\$tool --version does not name $pyversion ($commit)\"; exit 1 ;;
		esac
	done
	braid --version
	for tool in gwsteer-route gwsteer-cli braid-tor braid-openvpn; do
		\$tool --help >/dev/null || { echo \"\$tool --help failed\"; exit 1; }
	done
	gwsteer-check /usr/share/doc/braid/examples/gateways.conf
	# The plugin in the directory mptcpd loads plugins from (its
	# configuration's plugin-dir, which Debian's package sets).
	dir=\$(sed -n 's/^plugin-dir *= *//p' /etc/mptcpd/mptcpd.conf)
	[ \"\$dir\" = '$plugindir' ] || { echo \"mptcpd's plugins are in \$dir, not $plugindir\"; exit 1; }
	[ -f \"\$dir/gwsteer.so\" ] || { echo \"no gwsteer.so in \$dir\"; exit 1; }
	[ \"\$(stat -c '%U:%G %a' /etc/braid)\" = 'root:braid 750' ] || { stat /etc/braid; exit 1; }
	for user in braid braid-tor; do
		getent passwd \$user | grep -q ':/nonexistent:/usr/sbin/nologin\$'
	done
	/usr/lib/braid/venv/bin/python -m pip --disable-pip-version-check check >/dev/null
	[ \"\$(readlink -f /usr/bin/gwsteer-route)\" = /usr/lib/braid/venv/bin/gwsteer-route ]
	grep -qx 'ExecStart=/usr/bin/braid-proxy client -config /etc/braid/client.json' \
		/usr/lib/systemd/system/braid-proxy-client.service
	grep -qx 'ExecStart=/usr/lib/braid/venv/bin/gwsteer-route follow' \
		/usr/lib/systemd/system/braid-gwsteer-route.service
	grep -qx 'ExecStart=/usr/lib/braid/venv/bin/braid-tor bridge --pt /usr/bin/braid-pt --data-dir /var/lib/braid-tor/bridge' \
		/usr/lib/systemd/system/braid-tor-bridge.service
	# Installed, not enabled, and mptcpd left as it was.
	[ ! -e /etc/systemd/system/multi-user.target.wants/braid-proxy-client.service ]
	[ ! -e /etc/systemd/system/mptcp.service.d/braid-gwsteer.conf ]
	# The units, and Debian's mptcp.service with the drop-in linked as
	# docs/deploy.md says, as systemd reads them (offline).
	install -d /etc/systemd/system/mptcp.service.d
	ln -s /usr/share/braid/systemd/mptcp.service.d/braid-gwsteer.conf /etc/systemd/system/mptcp.service.d/
	systemd-analyze verify --man=no braid-gwsteer-route.service braid-proxy-client.service \
		braid-proxy-server.service braid-openvpn@client.service braid-tor-client.service \
		braid-tor-bridge.service mptcp.service
	rm -r /etc/systemd/system/mptcp.service.d
"

echo "=== reinstall: the venv made afresh, whatever pip's environment says ($(($(date +%s) - start))s)"
in_root "
	touch /usr/lib/braid/venv/stale
	PIP_FIND_LINKS=/nonexistent PIP_INDEX_URL=http://192.0.2.1/simple PIP_REQUIRE_HASHES=0 \
		dpkg -i /tmp/$debname >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; exit 1; }
	! grep -i -e warning -e error /tmp/dpkg.log || exit 1
	[ ! -e /usr/lib/braid/venv/stale ]
	braid --version >/dev/null
"

echo "=== apt-get remove, then purge ($(($(date +%s) - start))s)"
in_root "
	printf '[gwsteer]\nrole = proxy\n' >/etc/braid/gateways.conf
	apt-get remove -y -q braid >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
	[ ! -e /usr/lib/braid ] || { echo 'remove left /usr/lib/braid:'; find /usr/lib/braid | head; exit 1; }
	for f in /usr/bin/braid-proxy /usr/bin/braid /usr/share/braid /usr/lib/systemd/system/braid-proxy-client.service; do
		[ ! -e \$f ] && [ ! -L \$f ] || { echo \"remove left \$f\"; exit 1; }
	done
	[ -f /etc/braid/gateways.conf ] || { echo 'remove took /etc/braid/gateways.conf'; exit 1; }
	[ \"\$(stat -c '%U:%G %a' /etc/braid)\" = 'root:braid 750' ]
	dpkg --purge braid >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; exit 1; }
	[ -f /etc/braid/gateways.conf ] || { echo 'purge took /etc/braid/gateways.conf'; exit 1; }
	! dpkg-query -W braid >/dev/null 2>&1 || { echo 'braid still known to dpkg'; exit 1; }
	# Without the operator's file, purge leaves nothing of the package.
	rm /etc/braid/gateways.conf
	dpkg -i /tmp/$debname >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; exit 1; }
	dpkg --purge braid >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; exit 1; }
	for f in /etc/braid /usr/lib/braid /usr/share/braid /usr/share/doc/braid /usr/bin/braid-proxy; do
		[ ! -e \$f ] || { echo \"purge left \$f\"; exit 1; }
	done
"
echo "=== packaging tests passed ($(($(date +%s) - start))s)"
