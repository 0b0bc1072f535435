#!/usr/bin/env bats
# The README as a new user follows it: installed on PATH, the tour's first command as written.

load helper

REPO=$BATS_TEST_DIRNAME/../..

# The console block of the README whose command is $1: its output, as the README shows it.
readme_output() {
	awk -v cmd="\$ $1" '
		$0 == "```console" { inblock = 1; next }
		inblock && $0 == cmd { found = 1; next }
		$0 == "```" { if (found) exit; inblock = 0 }
		found { print }' "$REPO/README.md"
}

@test "make install PREFIX=DIR puts visdev on PATH, and the tour's first command runs as written" {
	run make -s -C "$REPO" install PREFIX="$BATS_TEST_TMPDIR/prefix" BUILD="$(dirname "$VISDEV")"
	assert_status 0
	[ -x "$BATS_TEST_TMPDIR/prefix/bin/visdev" ]
	[ -f "$BATS_TEST_TMPDIR/prefix/share/man/man1/visdev.1" ]
	first=$(awk '/^## A short tour/ { tour = 1 } tour && /^\$ visdev/ { sub(/^\$ /, ""); print; exit }' \
		"$REPO/README.md")
	[ "$first" = "visdev --demo list" ]
	want=$(readme_output "$first")
	[ -n "$want" ]
	# a clean login: the installed program, nothing of the build
	run env -i HOME="$HOME" PATH="$BATS_TEST_TMPDIR/prefix/bin:/usr/bin:/bin" sh -c "$first"
	assert_status 0
	if [ "$output" != "$want" ]; then
		diff <(printf '%s\n' "$want") <(printf '%s\n' "$output") >&2
		return 1
	fi
	# uninstall removes every file install put there, and nothing else
	touch "$BATS_TEST_TMPDIR/prefix/bin/someone-else"
	run make -s -C "$REPO" uninstall PREFIX="$BATS_TEST_TMPDIR/prefix" BUILD="$(dirname "$VISDEV")"
	assert_status 0
	[ "$(find "$BATS_TEST_TMPDIR/prefix" -type f)" = "$BATS_TEST_TMPDIR/prefix/bin/someone-else" ]
}

@test "make install says what to add to PATH and MANPATH, only where they lack it" {
	run env PATH=/usr/bin:/bin make -s -C "$REPO" install PREFIX="$BATS_TEST_TMPDIR/p" BUILD="$(dirname "$VISDEV")"
	assert_status 0
	assert_output_has "# $BATS_TEST_TMPDIR/p/bin is not on PATH: export PATH=$BATS_TEST_TMPDIR/p/bin:\$PATH"
	run env PATH="$BATS_TEST_TMPDIR/p/bin:/usr/bin:/bin" MANPATH="$BATS_TEST_TMPDIR/p/share/man" \
		make -s -C "$REPO" install PREFIX="$BATS_TEST_TMPDIR/p" BUILD="$(dirname "$VISDEV")"
	assert_status 0
	[[ "$output" != *"not on PATH"* && "$output" != *"man does not look"* ]]
	# a package's DESTDIR: files under it, no advice
	run env PATH=/usr/bin:/bin make -s -C "$REPO" install PREFIX=/usr DESTDIR="$BATS_TEST_TMPDIR/d" BUILD="$(dirname "$VISDEV")"
	assert_status 0
	[ -x "$BATS_TEST_TMPDIR/d/usr/bin/visdev" ]
	[[ "$output" != *PATH* ]]
}

@test "a manual page per command, installed; visdev help COMMAND opens it where man has it, else prints --help" {
	run make -s -C "$REPO" install PREFIX="$BATS_TEST_TMPDIR/prefix" BUILD="$(dirname "$VISDEV")"
	assert_status 0
	for c in list map pick run leases queue doctor top; do
		[ -f "$BATS_TEST_TMPDIR/prefix/share/man/man1/visdev-$c.1" ]
		# each option of its table is on its page
		for o in $("$VISDEV" $c --list-options | grep '^--' | sed 's/=$//'); do
			grep -qF -- "${o//-/\\-}" "$BATS_TEST_TMPDIR/prefix/share/man/man1/visdev-$c.1" ||
				{ echo "visdev-$c(1) lacks $o"; return 1; }
		done
	done
	run env MANPATH="$BATS_TEST_TMPDIR/prefix/share/man" MANPAGER=cat MANWIDTH=80 "$VISDEV" help queue
	assert_status 0
	[[ "${lines[0]}" == "VISDEV-QUEUE(1)"*"User Commands"* ]]
	assert_output_has "visdev-queue - run many jobs over the GPUs as they free, resumably"
	# no man on PATH: the command's --help
	mkdir nobin
	ln -s "$VISDEV" nobin/visdev
	run env PATH="$BATS_TEST_TMPDIR/nobin" visdev help queue
	assert_status 0
	[[ "${lines[0]}" == "usage: visdev queue"* ]]
}

@test "make demo says where the program is and how to put it on PATH" {
	run make -s -C "$REPO" demo BUILD="$(dirname "$VISDEV")"
	assert_status 0
	assert_output_has "# the program is $(dirname "$VISDEV")/visdev; to call it visdev"
	assert_output_has 'make install PREFIX=$HOME/.local && export PATH=$HOME/.local/bin:$PATH'
}
