#!/bin/sh
# Runs a command in a VM that boots Debian's own kernel (linux-image-amd64) under KVM, with
# this machine's root filesystem shared read-only over 9p and tmpfs on /tmp, /run, /var/tmp:
# for tests that need what this kernel lacks (project quotas). Output: the command's, from the
# VM's serial console; exit status: the command's.
#
#   tests/vm/run.sh [VAR=VALUE...] COMMAND [ARG...]
#
# VAR=VALUE: set for the command in the VM (with PATH and VOLPLUG_IN_VM=1). Exit 77 with the
# reason on stderr when there is no /dev/kvm, no qemu-system-x86_64, or no kernel with its xfs
# module in /lib/modules. VOLPLUG_VM_KERNEL: the kernel's version (default: the newest there).
# VOLPLUG_VM_TIMEOUT: seconds the VM may run (default 900). VOLPLUG_VM_ACCEL: kvm (default) or
# tcg; KVM that has not booted the kernel in VOLPLUG_VM_BOOT_TIMEOUT seconds (30: nested under
# some hypervisors it hangs printing nothing) is given up for tcg, emulated (~2x slower here).
# VOLPLUG_VM_DEBUG=7: the kernel's messages on the console. VOLPLUG_VM_MEMORY: the VM's memory
# (default 1G; its /tmp, a tmpfs, may hold half of it). A benchmark runs the same way:
#
#   VOLPLUG_VM_MEMORY=4G tests/vm/run.sh DIRFS=xfs ROUNDS=5 RUNTIME=3 bench/commit.sh
set -eu

here=$(cd "$(dirname "$0")" && pwd)
skip() {
	echo "vm: $*" >&2
	exit 77
}
[ -c /dev/kvm ] && [ -w /dev/kvm ] || skip "no /dev/kvm to run a VM (needs KVM)"
qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || skip "no qemu-system-x86_64 (package qemu-system-x86)"
busybox=$(command -v busybox || true)
[ -n "$busybox" ] && ldd "$busybox" >/dev/null 2>&1 && busybox=""
[ -n "$busybox" ] || skip "no static busybox (package busybox-static)"

ver=${VOLPLUG_VM_KERNEL:-}
if [ -z "$ver" ]; then
	for k in $(ls -v /boot/vmlinuz-* 2>/dev/null); do
		v=${k#/boot/vmlinuz-}
		ls /lib/modules/"$v"/kernel/fs/xfs/xfs.ko* >/dev/null 2>&1 && ver=$v
	done
fi
[ -n "$ver" ] && [ -r "/boot/vmlinuz-$ver" ] ||
	skip "no kernel in /boot with its modules in /lib/modules (package linux-image-amd64)"
moddir=/lib/modules/$ver

work=$(mktemp -d "${TMPDIR:-/tmp}/volplug-vm.XXXXXX")
trap 'kill "${vm:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
trap "exit 1" INT TERM
root=$work/initramfs
mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev" "$root/modules"
cp "$busybox" "$root/bin/busybox"
cp "$here/init" "$root/init"
chmod 755 "$root/init"

# The modules wanted and what they need (modules.dep), each once, needed ones first.
: >"$work/order"
add_module() {
	local line path dep name
	line=$(grep -E "(^|/)$1\.ko(\.[a-z]+)?:" "$moddir/modules.dep" | head -1)
	[ -n "$line" ] || return 0 # built in
	path=${line%%:*}
	grep -qxF "$path" "$work/order" && return 0
	for dep in ${line#*:}; do
		name=$(basename "$dep")
		add_module "${name%%.ko*}"
	done
	echo "$path" >>"$work/order"
}
for m in crc32c_generic crc32c_intel virtio_pci 9pnet_virtio 9p loop xfs ext4 quota_v2 \
	quota_tree; do
	add_module "$m"
done
while read -r path; do
	name=$(basename "$path")
	case $name in
	*.ko.xz) xz -dc "$moddir/$path" >"$root/modules/${name%.xz}" ;;
	*.ko.zst) zstd -qdc "$moddir/$path" >"$root/modules/${name%.zst}" ;;
	*.ko.gz) gzip -dc "$moddir/$path" >"$root/modules/${name%.gz}" ;;
	*) cp "$moddir/$path" "$root/modules/" ;;
	esac
	basename "${name%.ko*}.ko" >>"$root/modules.order"
done <"$work/order"

# quote STRING: STRING in single quotes for sh.
quote() {
	printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# The job: the environment asked for, then the command, in the directory it was started in.
{
	echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	echo "export VOLPLUG_IN_VM=1 HOME=/tmp LANG=C.UTF-8"
	while [ $# -gt 0 ]; do
		case $1 in
		*=*) printf "export %s=%s\n" "${1%%=*}" "$(quote "${1#*=}")" ;;
		*) break ;;
		esac
		shift
	done
	printf "cd %s || exit 1\nexec" "$(quote "$(pwd)")"
	for a in "$@"; do printf " %s" "$(quote "$a")"; done
	echo
} >"$root/job"

# The project's tree and the directory the command starts in, shared again at their own paths:
# the VM's /tmp, /var/tmp and /run are tmpfs, which would hide a clone made there.
shares=""
: >"$root/shares"
for d in "${VOLPLUG_SOURCE_ROOT:-}" "$(pwd)"; do
	[ -n "$d" ] && [ -d "$d" ] || continue
	d=$(cd "$d" && pwd -P)
	case " $(cut -d' ' -f2- "$root/shares" | tr '\n' ' ') " in *" $d "*) continue ;; esac
	tag=share$(wc -l <"$root/shares")
	echo "$tag $d" >>"$root/shares"
	shares="$shares -virtfs local,path=$d,mount_tag=$tag,security_model=none,readonly=on,multidevs=remap"
done

(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs.gz"

# boot ACCEL: starts the VM in the background ($vm), its serial console into $work/console.
boot() {
	rm -f "$work/console"
	timeout "${VOLPLUG_VM_TIMEOUT:-900}" "$qemu" -accel "$1" $cpu -m "${VOLPLUG_VM_MEMORY:-1G}" \
		-smp 2 -nographic \
		-serial "file:$work/console" -monitor none -no-reboot \
		-kernel "/boot/vmlinuz-$ver" -initrd "$work/initramfs.gz" \
		-append "console=ttyS0 ${VOLPLUG_VM_DEBUG:+ignore_}quiet \
loglevel=${VOLPLUG_VM_DEBUG:-3} panic=-1 rdinit=/init" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		$shares \
		-nic none </dev/null >"$work/qemu.log" 2>&1 &
	vm=$!
}

# booted SECONDS: whether the VM's init ran within SECONDS (KVM nested in some hypervisors
# hangs in the kernel's first instructions, printing nothing).
booted() {
	i=0
	while [ "$i" -lt "$1" ]; do
		grep -q "volplug-vm: booted" "$work/console" 2>/dev/null && return 0
		kill -0 "$vm" 2>/dev/null || return 1
		sleep 1
		i=$((i + 1))
	done
	return 1
}

accel=${VOLPLUG_VM_ACCEL:-kvm}
cpu=""
[ "$accel" = kvm ] && cpu="-cpu host"
started=$(date +%s)
boot "$accel"
if ! booted "${VOLPLUG_VM_BOOT_TIMEOUT:-30}" && [ "$accel" = kvm ] && [ ! -s "$work/status" ]; then
	kill "$vm" 2>/dev/null || true
	wait "$vm" 2>/dev/null || true
	echo "# vm: KVM did not boot the kernel within ${VOLPLUG_VM_BOOT_TIMEOUT:-30}s: emulating (TCG)"
	accel=tcg
	cpu="-cpu max"
	started=$(date +%s)
	boot tcg
fi
wait "$vm" || true
tr -d '\r' <"$work/console" 2>/dev/null | awk -v status="$work/status" '
	/^volplug-vm: / { print "# vm: " substr($0, 13) }
	/^VOLPLUG-VM-BEGIN$/ { on = 1; next }
	/^VOLPLUG-VM-END / { on = 0; print $2 > status; next }
	on { out[n++] = $0 }
	END { for (i = 0; i < n; i++) print out[i] }'
echo "# vm: kernel $ver, $accel, $(($(date +%s) - started))s from start to power-off"
if [ ! -s "$work/status" ]; then
	echo "vm: the command did not finish in the VM (kernel $ver); its console:" >&2
	tail -n 40 "$work/console" "$work/qemu.log" >&2
	exit 1
fi
status=$(cat "$work/status")
exit "$status"
