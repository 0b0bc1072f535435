#!/usr/bin/env bats
# The Debian packages (make deb), built, checked by lintian, installed on
# this machine with apt, used as a user would (the program, the library
# through pkg-config, the Python module, completion, the manual), purged,
# and nothing left. As root only (CI is root); it says it skips otherwise.

bats_require_minimum_version 1.5.0
export LC_ALL=C
REPO=$BATS_TEST_DIRNAME/../..
PACKAGES="visdev libvisdev0 libvisdev-dev python3-visdev"

setup_file() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to install packages (CI runs as root)"
	export DEBS=$BATS_FILE_TMPDIR/b/deb
	# a plain build: not the sanitizers' or any other make's variables
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$REPO" deb BUILD="$BATS_FILE_TMPDIR/b" \
		>"$BATS_FILE_TMPDIR/deb.log" 2>&1 || { cat "$BATS_FILE_TMPDIR/deb.log" >&2; return 1; }
}

teardown_file() {
	[ "$(id -u)" -eq 0 ] || return 0
	# shellcheck disable=SC2086 # a list of packages
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $PACKAGES >/dev/null 2>&1 || true
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
}

@test "four packages; lintian finds no error and no warning" {
	for p in $PACKAGES; do
		ls "$DEBS/${p}_"*.deb
	done
	run lintian --allow-root --pedantic -I "$DEBS"/*.changes
	# lintian's verdict, whole, in the test's output
	printf '# lintian: %s\n' "${output:-nothing to say}" >&3
	! grep -E '^[EW]: ' <<<"$output"
	# the library's ABI is pinned: a symbols file, checked at build time
	[ -s "$REPO/debian/libvisdev0.symbols" ]
	dpkg-deb -c "$DEBS"/libvisdev0_*.deb | grep -q 'libvisdev.so.0$'
	dpkg-deb -I "$DEBS"/libvisdev0_*.deb symbols | grep -q '^ vd_system_free@Base'
}

@test "installed with apt: the program, the library, the module, completion and the manual work; purged, nothing is left" {
	# shellcheck disable=SC2046 # the package files, no debug symbols
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		$(ls "$DEBS"/*.deb | grep -v dbgsym) >install.log 2>&1 || { cat install.log; return 1; }
	for p in $PACKAGES; do dpkg -L "$p"; done | sort -u >files
	# the program, as a user runs it
	run /usr/bin/visdev --demo list
	[ "$status" -eq 0 ]
	[[ "${lines[1]}" == "  0  Tesla V100-SXM2-32GB"* ]]
	# the library, through pkg-config
	cat >t.c <<'C'
#include <stdio.h>
#include <visdev.h>
int main(void)
{
	struct vd_backend_options o = { .demo = 1 };
	struct vd_backend *b = NULL;
	struct vd_system *sys = NULL;

	if (vd_backend_open(&b, &o) || vd_backend_snapshot(&sys, b))
		return 1;
	printf("%s %zu\n", vd_version(), sys->ngpus);
	vd_system_free(sys);
	vd_backend_free(b);
	return 0;
}
C
	# shellcheck disable=SC2046
	cc -o t t.c $(pkg-config --cflags --libs visdev)
	[ "$(./t)" = "$(/usr/bin/visdev --version | sed -n 's/^libvisdev //p') 4" ]
	ldd ./t | grep -Eq "libvisdev.so.0 => (/usr)?/lib/"
	# the module
	[ "$(/usr/bin/python3 -c 'import visdev; visdev.use_demo(); print(len(visdev.devices()))')" = 4 ]
	# completion, as bash and fish load it
	[ "$(bash -c 'source /usr/share/bash-completion/completions/visdev; COMP_WORDS=(visdev le); COMP_CWORD=1; _visdev; echo "${COMPREPLY[*]}"')" = leases ]
	[ "$(fish -c 'complete -C "visdev run --pol"' | cut -f1)" = --policy ]
	# the manual
	man -w visdev >/dev/null
	man -w visdev-queue >/dev/null
	# purged: no package, no file
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $PACKAGES >purge.log 2>&1
	for p in $PACKAGES; do
		! dpkg -s "$p" >/dev/null 2>&1
	done
	while read -r f; do
		[ -d "$f" ] || [ ! -e "$f" ] || { echo "left after purge: $f"; return 1; }
	done <files
	[ ! -e /usr/bin/visdev ]
}
