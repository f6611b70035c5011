#!/bin/sh
# Installs the Flexvolume drivers baked into this image into the host's plugin directory,
# then stays running, as the flexvolume-deployment design recommends: run it in a DaemonSet
# and every node gets the drivers, a new node gets them when it joins, and rolling out a new
# image upgrades them.
#
# The volplug image has it as /usr/bin/volplug-flexvolume-installer, and the example drivers of
# examples/flexvolume in /drivers (deploy/container/build-image puts them there). The image
# holds one folder per driver under $DRIVERS (default /drivers), named as in the plugin
# directory: <vendor>~<name>, with the executable <name> in it and any files it needs.
# The host's plugin directory is mounted at $FLEXMNT (default /flexmnt).
#
# Each file is written under a dot-name (which volplugd and the kubelet ignore), made
# executable if it is the driver, flushed to disk, and renamed into place: a rename within a
# directory is atomic, so a prober never sees a half-written driver. The executable goes
# last, so the driver appears with everything it needs. A file already identical is left alone, so a restarted
# pod does not make volplugd reload the driver for nothing.
set -eu

DRIVERS=${DRIVERS:-/drivers}
FLEXMNT=${FLEXMNT:-/flexmnt}

log() {
	printf 'flexvolume-installer: %s\n' "$*" >&2
}

# install_file SRC DIR NAME [MODE]: SRC becomes DIR/NAME (with MODE), atomically.
install_file() {
	if cmp -s "$1" "$2/$3" && { [ -z "${4:-}" ] || [ -x "$2/$3" ]; }; then
		return 0
	fi
	tmp="$2/.$3"
	cp "$1" "$tmp"
	[ -z "${4:-}" ] || chmod "$4" "$tmp"
	sync "$tmp"
	mv -f "$tmp" "$2/$3"
	log "installed $2/$3"
}

[ -d "$FLEXMNT" ] || {
	log "$FLEXMNT is not a directory: mount the host's Flexvolume plugin directory there"
	exit 1
}

# Exit at once on TERM, from here on: a pod stopped while it installs ends too, and one
# stopped as soon as its drivers are in place is not left waiting for its grace period.
trap 'exit 0' TERM INT

n=0
for src in "$DRIVERS"/*; do
	[ -d "$src" ] || continue
	folder=${src##*/}
	name=${folder##*~}
	if [ ! -f "$src/$name" ]; then
		log "$src: no driver executable $name in it, skipped"
		continue
	fi
	dst="$FLEXMNT/$folder"
	mkdir -p "$dst"
	for f in "$src"/* "$src"/.[!.]*; do
		[ -f "$f" ] || continue
		[ "${f##*/}" = "$name" ] || install_file "$f" "$dst" "${f##*/}"
	done
	install_file "$src/$name" "$dst" "$name" 0755
	# The renames themselves reach the disk.
	sync "$dst"
	n=$((n + 1))
done

if [ "$n" -eq 0 ]; then
	log "no drivers found in $DRIVERS"
	exit 1
fi
log "$n driver(s) in place in $FLEXMNT; sleeping"

# Stay up so the DaemonSet keeps its pod (and a new image re-installs).
while :; do
	sleep 3600 &
	wait $! || true
done
