#!/usr/bin/env bats
# Shell completion, driven as the shells drive it: bash's completion
# function with COMP_WORDS, fish's `complete -C`. The candidates come from
# visdev (`__complete`), and options from each command's own parsing table.

load helper

COMPLETIONS=$BATS_TEST_DIRNAME/../../completions

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	unset VISDEV_FIXTURE CUDA_VISIBLE_DEVICES
	export VISDEV_NVML_LIB=$BATS_TEST_TMPDIR/no-such-libnvidia-ml.so.1
	mkdir bin
	ln -s "$VISDEV" bin/visdev
	export PATH=$BATS_TEST_TMPDIR/bin:$PATH
}

# What bash would offer for the words given, the last being completed.
bash_complete() {
	bash -c 'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _visdev
		printf "%s\n" "${COMPREPLY[@]}"' "$COMPLETIONS/visdev.bash" "$@"
}

# What fish would offer for the line given.
fish_complete() {
	fish -c "source $COMPLETIONS/visdev.fish; complete -C '$1'" | cut -f1
}

@test "bash: commands, options, their values, GPUs for --exclude, files, the command after --" {
	[ "$(bash_complete visdev li)" = list ]
	[ "$(bash_complete visdev le)" = leases ]
	[ "$(bash_complete visdev run --pol)" = --policy ]
	[ "$(bash_complete visdev run --policy "" | tr '\n' ' ')" = "most-free least-used pack " ]
	[ "$(bash_complete visdev map 2,1 --order "" | tr '\n' ' ')" = "pci fastest " ]
	[ "$(bash_complete visdev pick --shell f)" = fish ]
	[ "$(bash_complete visdev list --format "")" = prometheus ]
	# the GPUs of the machine the command line names: indices and UUIDs
	[ "$(bash_complete visdev --demo run --exclude "" | tr '\n' ' ')" = \
		"0 GPU-8932f937-d72c-4106-c12f-20bd9faed9f6 1 GPU-2d3f1a5c-7b90-4e62-91a8-3c5e7f0b4d21 2 GPU-b61e4c27-0f3a-4d85-a9e2-6c17d84f5b30 3 GPU-5f0a9e83-41c6-42b7-8d3e-e29b70c1a6f4 " ]
	[ "$(bash_complete visdev --fixture "$FIXTURES/one.json" pick --exclude "")" = "$(printf '0\nGPU-9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b')" ]
	# files where a file is meant
	touch sweep.txt fixture-a.json
	[ "$(bash_complete visdev --fixture fixture-)" = fixture-a.json ]
	[ "$(bash_complete visdev queue swe)" = sweep.txt ]
	# after --, the job's command
	bash_complete visdev run -n 2 -- bas | grep -qx bash
	# nothing for a value anyone types
	[ -z "$(bash_complete visdev run --min-free "")" ]
}

@test "fish: the same candidates" {
	[ "$(fish_complete 'visdev li')" = list ]
	[ "$(fish_complete 'visdev run --pol')" = --policy ]
	[ "$(fish_complete 'visdev run --policy ' | tr '\n' ' ')" = "least-used most-free pack " ]
	[ "$(fish_complete 'visdev --demo pick --exclude ' | grep -c .)" -eq 8 ]
	[ "$(fish_complete 'visdev top --co')" = --color ]
	fish_complete 'visdev run -- bas' | grep -qx bash
}

@test "every option a command parses is completed and in its --help, and every one its --help names is parsed" {
	for cmd in list map pick run leases queue doctor top; do
		parsed=$("$VISDEV" $cmd --list-options | sed 's/=$//' | sort)
		offered=$(bash_complete visdev $cmd - | sort)
		[ "$parsed" = "$offered" ] || { echo "$cmd: completion differs from the table"; return 1; }
		help=$("$VISDEV" $cmd --help)
		for o in $(grep '^--' <<<"$parsed"); do
			grep -q -- "$o\\b" <<<"$help" || { echo "$cmd: $o is parsed but not in --help"; return 1; }
		done
		# the options --help describes: its lines "  --name ..." and "  -x, --name ..."
		for o in $(grep -oE -- '^  (-[a-zA-Z], )?--[a-z][a-z-]*' <<<"$help" | grep -oE -- '--[a-z-]+$' | sort -u); do
			grep -qx -- "$o" <<<"$parsed" || { echo "$cmd: --help names $o, which it does not parse"; return 1; }
		done
	done
}

@test "make install puts the completions where bash, zsh and fish look" {
	run make -s -C "$BATS_TEST_DIRNAME/../.." install PREFIX="$BATS_TEST_TMPDIR/prefix" BUILD="$(dirname "$VISDEV")"
	assert_status 0
	cmp "$COMPLETIONS/visdev.bash" prefix/share/bash-completion/completions/visdev
	cmp "$COMPLETIONS/_visdev" prefix/share/zsh/site-functions/_visdev
	cmp "$COMPLETIONS/visdev.fish" prefix/share/fish/vendor_completions.d/visdev.fish
}
