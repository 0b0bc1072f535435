#!/usr/bin/env bats
# Option and command mistakes: one line naming the mistake, the nearest real
# option or command, and where the help is; long options never abbreviated.
load helper

# The number of lines of $output.
lines_of() {
	printf '%s\n' "$output" | wc -l
}

@test "run --n 2 is an unknown option with a suggestion, in one line, and nothing runs" {
	run "$VISDEV" --demo run --n 2 touch started
	assert_status 2
	[ "$output" = "visdev: unknown option '--n' (did you mean -n?); see 'visdev run --help'" ]
	[ "$(lines_of)" -le 3 ]
	[[ "$output" != *"cannot load"* ]]
	[ ! -e started ]
}

@test "no command takes an abbreviated long option" {
	for cmd in list map pick leases; do
		run "$VISDEV" --demo "$cmd" --jso
		assert_status 2
		[ "$output" = "visdev: unknown option '--jso' (did you mean --json?); see 'visdev $cmd --help'" ]
		run "$VISDEV" "$cmd" --fix "$FIXTURES/mixed.json"
		assert_status 2
		assert_output_has "unknown option '--fix' (did you mean --fixture?)"
	done
	run "$VISDEV" --demo run --quie -- touch started
	assert_status 2
	assert_output_has "unknown option '--quie' (did you mean --quiet?)"
	run "$VISDEV" --demo pick --min=8G
	assert_status 2
	assert_output_has "unknown option '--min' (did you mean --min-free?)"
	run "$VISDEV" --demo map --ord pci 0
	assert_status 2
	assert_output_has "unknown option '--ord' (did you mean --order?)"
	# an abbreviation that fits several names gets no guess
	run "$VISDEV" --demo pick --m 8G
	assert_status 2
	[ "$output" = "visdev: unknown option '--m'; see 'visdev pick --help'" ]
	[ ! -e started ]
}

@test "options written in full still work, a value starting with a dash included" {
	run "$VISDEV" --fixture "$FIXTURES/mixed.json" map --order pci -1 --json
	assert_status 0
	[ "$(jq -r '.value' <<<"$output")" = "-1" ]
	run "$VISDEV" --demo pick --min-free=8G --value --format=index
	assert_status 0
	[[ "$output" =~ ^[0-9]+$ ]]
}

@test "short options: unknown ones, a long name with one dash, a value missing" {
	run "$VISDEV" --demo run -z true
	assert_status 2
	[ "$output" = "visdev: unknown option '-z'; see 'visdev run --help'" ]
	run "$VISDEV" --demo run -qz true
	assert_status 2
	assert_output_has "unknown option '-z'"
	run "$VISDEV" --demo pick -json
	assert_status 2
	assert_output_has "unknown option '-json' (did you mean --json?)"
	run "$VISDEV" --demo pick -n
	assert_status 2
	[ "$output" = "visdev: option '-n' needs a value; see 'visdev pick --help'" ]
}

@test "a long option's value: missing, or given to one that takes none" {
	run "$VISDEV" pick --fixture
	assert_status 2
	[ "$output" = "visdev: option '--fixture' needs a value; see 'visdev pick --help'" ]
	run "$VISDEV" --demo list --json=yes
	assert_status 2
	[ "$output" = "visdev: option '--json' takes no value ('--json=yes' given); see 'visdev list --help'" ]
	run "$VISDEV" --fixture
	assert_status 2
	[ "$output" = "visdev: option '--fixture' needs a value; see 'visdev --help'" ]
}

@test "an unknown command or global option is one line with the nearest real one" {
	run "$VISDEV" --demo lsit
	assert_status 2
	[ "$output" = "visdev: 'lsit' is not a visdev command (did you mean list?); see 'visdev --help'" ]
	run "$VISDEV" frobnicate
	assert_status 2
	[ "$output" = "visdev: 'frobnicate' is not a visdev command; see 'visdev --help'" ]
	run "$VISDEV" --jsno list
	assert_status 2
	[ "$output" = "visdev: unknown option '--jsno' (did you mean --json?); see 'visdev --help'" ]
	run "$VISDEV" --vers
	assert_status 2
	assert_output_has "(did you mean --version?)"
}

@test "visdev help, visdev help COMMAND, -V" {
	run "$VISDEV" help
	assert_status 0
	assert_output_has "usage: visdev "
	assert_output_has "visdev help COMMAND"
	for cmd in list map pick run leases; do
		run "$VISDEV" "$cmd" --help
		local want=$output
		run "$VISDEV" help "$cmd"
		assert_status 0
		assert_output_has "usage: visdev $cmd"
		[ "$output" = "$want" ]
	done
	run "$VISDEV" help lsit
	assert_status 2
	assert_output_has "'lsit' is not a visdev command (did you mean list?)"
	run "$VISDEV" help run pick
	assert_status 2
	run "$VISDEV" -V
	assert_status 0
	local short=$output
	run "$VISDEV" --version
	[ "$output" = "$short" ]
	[[ "${lines[0]}" =~ ^visdev\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
	[[ "${lines[1]}" =~ ^libvisdev\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
	# the driver's, when NVML loads (never a fixture's); else why not
	[[ "${lines[2]}" == "NVIDIA driver: none loaded (no NVIDIA driver found: cannot load "* ]]
	run env MOCK_NVML_FIXTURE="$FIXTURES/four.json" VISDEV_NVML_LIB="$MOCK_NVML_DIR/libnvidia-ml.so.1" \
		VISDEV_FIXTURE="$FIXTURES/mixed.json" "$VISDEV" --version
	assert_status 0
	[ "${lines[2]}" = "NVIDIA driver 550.54.15 (CUDA 12.4), from $MOCK_NVML_DIR/libnvidia-ml.so.1" ]
}
